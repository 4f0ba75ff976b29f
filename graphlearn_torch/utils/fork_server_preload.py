"""Imported last by the fork servers this library starts
(``utils.spawn.fork_server_context``): collects the garbage its preloaded
imports left and freezes what remains. A process forked from a server with
a full collection pending runs it first thing, before it can freeze what it
inherited, and writing to every object copies every page they lie on (a
test script's children held 105 MB of their own each instead of 19).
Imported anywhere else it does the same there, and leaks nothing (the
collection runs before the freeze)."""

import gc

gc.collect()
gc.freeze()
