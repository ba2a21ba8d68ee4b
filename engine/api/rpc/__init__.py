"""The gRPC handlers, one module per RPC family: each takes (request, context) and returns the response.

A handler resolves the namespace, validates, calls one service and converts back (engine/api/convert.py);
engine/api/servicer.py maps each RPC to its handler.
"""
