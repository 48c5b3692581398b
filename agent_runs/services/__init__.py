"""Writes of the run core (HackSoft style: ``<entity>_<action>`` functions), one module per
entity: runs, messages, queue, memory, tokens."""
