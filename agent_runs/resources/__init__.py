"""The service's own REST resources, which are no protocol's: the caller's threads and runs
read a page at a time, the interrupts (approvals answered from any client), the caller's API
keys and automation jobs, all under ``/api/v1/agent/`` (docs/protocols/agui.md, Threads and
runs; docs/automations.md). Every protocol's runs show in them.

An edge package with a protocol's shape (docs/adding-a-protocol.md): ``inbound`` (the pages'
query), ``outbound`` (the response shapes), ``views/`` (threads, keys, automations),
``errors``, ``urls`` (included once from config/urls.py) and ``openapi``. It imports the core
and the edge kit, never a protocol, and no protocol imports it.
"""
