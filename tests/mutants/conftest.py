"""The mutants run on the engine tier's DynamoDB Local (one per session, shared)."""

from tests.engine.conftest import dynamodb_local

__all__ = ["dynamodb_local"]
