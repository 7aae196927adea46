"""The model layer: what a model is asked and answers (`types`), the providers that ask it (`providers`, the one
registry; one module each), retries, the SSE reader, the transports to the operator's and tenants' endpoints, and
tool calls a model writes as text (`written_calls`). It has no models and imports only `kagent` and `tools`."""
