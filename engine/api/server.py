"""The gRPC server (Temporal's 'frontend'): WorkflowService plus the standard health service."""

from __future__ import annotations

import logging

import grpc
from temporalio.api.workflowservice.v1 import service_pb2_grpc as wss

from engine.api import dbthreads
from engine.api.servicer import WorkflowService

log = logging.getLogger("perdura.api")
MAX_MESSAGE_BYTES = 128 * 1024 * 1024


def build(address: str, *, db_threads: int = 16) -> grpc.aio.Server:
    """A grpc.aio server bound to `address` (host:port), not yet started."""
    dbthreads.configure(db_threads)
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ]
    )
    wss.add_WorkflowServiceServicer_to_server(WorkflowService(), server)
    bound = server.add_insecure_port(address)
    if bound == 0:
        raise SystemExit(f"cannot listen on {address}: is another server using that port?")
    log.info("gRPC API listening on %s", address)
    return server
