"""Every DynamoDB string of the library: keys, attribute names, expressions, codecs.

Nothing outside this package spells a key format, an attribute name or an expression.
Items are in DynamoDB's wire format (`{"S": ...}`, `{"N": ...}`), which boto3's and
aiobotocore's low-level clients share. Callers import this package (`keys.bucket_key`);
the modules below it are only where each part is written down.
"""

from zae_limiter.keys.audit import *  # noqa: F403
from zae_limiter.keys.buckets import *  # noqa: F403
from zae_limiter.keys.core import *  # noqa: F403
from zae_limiter.keys.entities import *  # noqa: F403
from zae_limiter.keys.reserves import *  # noqa: F403
from zae_limiter.keys.takes import (
    ADD as ADD,
)
from zae_limiter.keys.takes import (
    CHECK as CHECK,
)
from zae_limiter.keys.takes import (
    GIVE as GIVE,
)
from zae_limiter.keys.takes import (
    REBASE as REBASE,
)
from zae_limiter.keys.takes import (
    SET as SET,
)
from zae_limiter.keys.takes import (
    LimitWrite as LimitWrite,
)
from zae_limiter.keys.takes import (
    give_back_write as give_back_write,
)
from zae_limiter.keys.takes import (
    set_shard_count as set_shard_count,
)
from zae_limiter.keys.takes import (
    take_write as take_write,
)
from zae_limiter.keys.usage import *  # noqa: F403
from zae_limiter.keys.version import *  # noqa: F403
