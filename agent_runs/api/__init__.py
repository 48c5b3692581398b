"""The edge kit: what every protocol package (``agent_runs/protocols/``) and the ``history``
and ``attachments`` views are built on. docs/adding-a-protocol.md walks through it.

- ``json_input``: the JSON body reader, refusing what PostgreSQL could not store;
- ``ids``: ids read from a URL or a query (a threadId, a runId), a 404 when no row can
  have them;
- ``awaited``: answers that wait on a run without holding a request thread;
- ``sse``: the one SSE frame writer, and the ``text/event-stream`` response;
- ``journal``: the one loop "follow the journal, translate, frame, keep alive", and the
  ``Translator`` interface each protocol's outbound translator implements;
- ``openapi``: the generic OpenAPI helpers (error responses, the bearer scheme);
- ``views``: the base view whose error rendering each protocol supplies;
- ``authentication``: who calls, resolved once per request (bearer tokens, the session,
  stream tokens; ``request_user``), the API keys' scopes, and the Channels middleware of the
  streams. Tokens are found by the core's token services (agent_runs/services/tokens.py),
  which keep the per-process token cache.
"""
