"""The store's nouns as pydantic models (rollouts, attempts, spans, rewards, resources, workers),
their statuses and legal transitions, and the contract's one-argument requests."""
