"""The model-calling floor: every call to a model goes through the gateway (gateway.py). It knows no stage,
prompt or test double; providers LiteLLM does not know plug in through providers.py.

- gateway.py: chat and embedding calls, parsed, cached and accounted;
- transport.py: sending within limits and budget, with retries (failures.py says which errors retry);
- embeddings.py: vectors in bounded calls; batch.py and batch_store.py: provider batch jobs;
- calls.py: a call's vocabulary; errors.py: how calls fail; prices.py: what they cost;
- limits.py: concurrency and rate limits; ledger.py: what every call cost, and the budget;
- cache.py: the answer cache; per_item.py: one call per item, failures counted, not raised.
"""
