"""Operations: health (``/healthz``, ``/readyz``), Prometheus metrics and log formatting."""
