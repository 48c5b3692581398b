"""Reading Prometheus' text format in tests."""

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample: (name, its labels) → value."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(text: str, name: str, **labels: str) -> float | None:
    return samples(text).get((name, frozenset(labels.items())))


def families(text: str) -> set[str]:
    """The metrics listed, by family name (a counter's without ``_total``)."""
    return {family.name for family in text_string_to_metric_families(text)}
