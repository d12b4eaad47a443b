"""Load generation against OpenAI-compatible endpoints: datasets, SSE, records, summaries."""
