"""`python -m zae_limiter.demo`."""

from __future__ import annotations

from zae_limiter.demo.app import main

raise SystemExit(main())
