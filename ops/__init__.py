"""Operations: health (``/healthz``, ``/readyz``), Prometheus metrics, log formatting, and the
code metrics developers check the code against (``code_metrics.py``)."""
