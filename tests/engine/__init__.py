"""Engine tier: tests against a real DynamoDB-compatible endpoint over HTTP."""
