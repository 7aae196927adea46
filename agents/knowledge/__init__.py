"""Knowledge: sources split into passages, indexed for ranked search, and API sources fetched on a schedule.

Where each part lives, from the bottom up (a module imports only modules above it in this list):
`terms` the one function that turns text into search terms (indexing and querying alike); `passages` how a text or
Markdown source is split; `rows` how an API source's JSON becomes passages; `index` the search index (a tsvector
column with a GIN index on PostgreSQL), written and queried; `results` what the model is shown of the hits; `fetch`
one fetch of an API source through the hardened outbound client.
"""
