"""The RL math and state: rewards, advantages, exemplar sampling and the exemplar buffer.

Everything here is plain Python (no Ray, no torch at import), tested without a cluster.
"""

from .advantages import group_advantages, rollout_advantages, tie_clusters
from .buffer import ExemplarBuffer
from .exemplars import Bucket, bucket_probabilities, bucketize, sample_exemplars
from .rewards import Priced, RewardConfig, price

__all__ = [
    "Bucket",
    "ExemplarBuffer",
    "Priced",
    "RewardConfig",
    "bucket_probabilities",
    "bucketize",
    "group_advantages",
    "price",
    "rollout_advantages",
    "sample_exemplars",
    "tie_clusters",
]
