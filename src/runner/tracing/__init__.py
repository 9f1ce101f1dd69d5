"""Tracing an attempt: the attempt code runs in (`context`), its OpenTelemetry TracerProvider (`tracer`),
the agent name its spans are tagged with (`agent_label`), spans libraries start on the global provider
routed to their attempt (`global_spans`), SDK spans converted to the store's (`span_convert`) and where
finished spans go (`sink`)."""
