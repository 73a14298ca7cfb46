"""The admin client: create, delete and describe topics; partitions, configs, records, cluster.

::

    from samsa.admin import AdminClient, NewTopic

    with AdminClient({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
        admin.create_topics([NewTopic("events", num_partitions=3, configs={"retention.ms": "60000"})])
        print(admin.list_topics())
        print(admin.describe_topics(["events"])["events"].partitions)

Modules: ``client`` (AdminClient: routing, retries, versions), ``messages`` (requests built
per version and responses read into values), ``groups`` (the same for consumer groups),
``scram`` (SCRAM users, KIP-554), ``acls`` (ACL requests and answers; the ACL values come
from samsa.security.acl and are re-exported here), ``types`` (NewTopic, TopicDescription, ...), ``errors``
(per-topic errors that say what to do), ``config`` (AdminConfig).
"""

from samsa.admin.client import AdminClient
from samsa.admin.config import ADMIN_CONFIG, AdminConfig
from samsa.admin.configs import AlterConfigOp, AlterConfigOpType
from samsa.admin.groups import GroupDescription, GroupListing, MemberDescription
from samsa.admin.scram import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from samsa.admin.types import (
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    CreatedTopic,
    NewPartitions,
    NewTopic,
    PartitionDescription,
    TopicDescription,
    format_topic_id,
)
from samsa.net import Node, TopicPartition
from samsa.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = [
    "ADMIN_CONFIG", "CLUSTER_NAME", "AclBinding", "AclBindingFilter", "AclOperation",
    "AclPermissionType", "AdminClient", "AdminConfig", "AlterConfigOp", "AlterConfigOpType", "ClusterDescription", "ConfigEntry",
    "ConfigResource", "ConfigResourceType", "ConfigSource", "CreatedTopic", "GroupDescription",
    "GroupListing", "MemberDescription", "NewPartitions",
    "NewTopic", "Node", "PartitionDescription", "PatternType", "ResourceType", "ScramCredentialInfo", "TopicDescription",
    "TopicPartition", "UserScramCredentialDeletion", "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription", "format_topic_id",
]
