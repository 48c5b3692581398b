"""What the benchmarks of usage records share (bench_billing, bench_model)."""

# One model call's usage as the pipeline passes it to ``usage_record``: the direct fields,
# and the provider's raw usage object (DeepSeek's shape, with a prompt cache hit).
CALL_USAGE = {"input_tokens": 1200, "output_tokens": 300, "time": 1.234}
CALL_METADATA = {
    "prompt_tokens": 1200,
    "completion_tokens": 300,
    "total_tokens": 1500,
    "prompt_tokens_details": {"cached_tokens": 1024},
    "prompt_cache_hit_tokens": 1024,
    "prompt_cache_miss_tokens": 176,
}
