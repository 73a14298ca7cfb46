"""SASL mechanisms and their settings, shared by the clients and the broker (KIP-43, KIP-84).

``scram`` holds SCRAM-SHA-256/512 (RFC 5802, RFC 7677), ``plain`` SASL/PLAIN (RFC 4616) and
``jaas`` the parser of Java's ``sasl.jaas.config`` values that name their credentials.
"""
