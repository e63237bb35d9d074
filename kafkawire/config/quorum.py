"""KRaft roles and quorum settings, parsed and checked with Kafka's rules and messages.

``process.roles`` (broker, controller or both), ``node.id``, ``controller.listener.names``,
``listener.security.protocol.map``, ``controller.quorum.voters`` (static quorum,
``id@host:port,...``) and ``controller.quorum.bootstrap.servers`` (dynamic quorum, KIP-853,
``host:port,...``). The messages are Kafka 4.3.1's (``KafkaConfig.validateValues``,
``QuorumConfig``), as its ``kafka-storage format`` prints them.

A node with neither quorum setting is kafkawire's implicit single node (``make run``): its own
one-voter quorum in-process, no controller listener needed; only the syntax of the settings it
does give is checked. Naming a quorum (either setting) asks for Kafka's full rules:
``process.roles`` and ``node.id`` required, voters parsed, and the listener rules of each role.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkawire.config.broker_config import BrokerConfig

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
ROLES = ("broker", "controller")


class QuorumConfigError(ValueError):
    """A KRaft setting Kafka refuses; the message is Kafka's."""


@dataclass(frozen=True)
class Voter:
    node_id: int
    host: str
    port: int


def _items(raw: object) -> list[str]:
    return [s.strip() for s in str(raw or "").split(",") if s.strip()]


def parse_roles(raw: str) -> frozenset[str]:
    items = _items(raw)
    if not items:
        raise QuorumConfigError("Configuration 'process.roles' must not be empty. "
                                "Valid values include: [broker, controller]")
    for item in items:
        if item not in ROLES:
            raise QuorumConfigError(f"Invalid value {item} for configuration process.roles: "
                                    "String must be one of: broker, controller")
    return frozenset(items)


def _host_port(entry: str) -> tuple[str, int] | None:
    host, sep, port = entry.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def parse_voters(raw: str) -> list[Voter]:
    """``controller.quorum.voters``: ``{id}@{host}:{port}`` entries."""
    out: list[Voter] = []
    for entry in _items(raw):
        node, at, address = entry.partition("@")
        if not at:
            raise QuorumConfigError(
                f"Failed to parse host name from entry {entry} for the configuration "
                "controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`.")
        try:
            node_id = int(node)
        except ValueError:
            raise QuorumConfigError(
                f"Failed to parse voter ID as an integer from {node}") from None
        hp = _host_port(address)
        if hp is None:
            raise QuorumConfigError(
                f"Failed to parse host name from entry {entry} for the configuration "
                "controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`.")
        out.append(Voter(node_id, *hp))
    return out


def parse_bootstrap_servers(raw: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for entry in _items(raw):
        hp = _host_port(entry)
        if hp is None:
            raise QuorumConfigError(
                f"Failed to parse host name from {entry} for the configuration "
                'controller.quorum.bootstrap.servers. Each entry should be in the form '
                '"{host}:{port}"')
        out.append(hp)
    return out


def parse_security_protocol_map(raw: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in _items(raw):
        name, sep, proto = entry.partition(":")
        if not sep:
            raise QuorumConfigError(
                "Error parsing configuration property 'listener.security.protocol.map': "
                f"{entry!r} is not of the form LISTENER:PROTOCOL")
        proto = proto.strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise QuorumConfigError(
                f"Invalid security protocol `{proto}` defined in listener.security.protocol.map")
        out[name.strip().upper()] = proto
    return out


def _check_listeners(cfg: BrokerConfig, roles: frozenset[str], protocols: dict[str, str]) -> None:
    names = [lst.name for lst in cfg.listeners]
    controller_names = cfg.controller_listener_names
    for name in names:
        if name not in protocols:
            raise QuorumConfigError(
                f"Error creating broker listeners from '[{', '.join(cfg.listener_specs)}]': "
                f"No security protocol defined for listener {name}")
    if roles == {"broker"}:
        if controller_names & set(names):
            raise QuorumConfigError(
                "controller.listener.names must not contain a value appearing in the "
                "'listeners' configuration when running KRaft with just the broker role")
        for name in sorted(controller_names):
            if name not in protocols:
                raise QuorumConfigError(
                    f"Controller listener with name {name} defined in controller.listener.names "
                    "not found in listener.security.protocol.map  (an explicit security mapping "
                    "for each controller listener is required if listener.security.protocol.map "
                    "is non-empty, or if there are security protocols other than PLAINTEXT in use)")
        return
    if roles == {"controller"} and any(n not in controller_names for n in names):
        raise QuorumConfigError(
            "The listeners config must only contain KRaft controller listeners from "
            "controller.listener.names when process.roles=controller")
    if not controller_names & set(names):
        raise QuorumConfigError(
            "controller.listener.names must contain at least one value appearing in the "
            "'listeners' configuration when running the KRaft controller role")


def validate_kraft(cfg: BrokerConfig) -> None:
    """Kafka's checks of the KRaft settings (see the module docstring for when they apply)."""
    roles = parse_roles(str(cfg.values["process.roles"]))
    protocols = parse_security_protocol_map(str(cfg.values["listener.security.protocol.map"]))
    voters = parse_voters(str(cfg.values["controller.quorum.voters"]))
    bootstrap = parse_bootstrap_servers(str(cfg.values["controller.quorum.bootstrap.servers"]))
    if not cfg.names_a_quorum:
        return
    for key in ("process.roles", "node.id", "controller.listener.names"):
        if key not in cfg.explicit and not (key == "node.id" and "broker.id" in cfg.explicit):
            raise QuorumConfigError(
                f'Missing required configuration "{key}" which has no default value.')
    if not voters and not bootstrap:
        raise QuorumConfigError(
            "If using process.roles, either controller.quorum.bootstrap.servers must contain "
            "the set of bootstrap controllers or controller.quorum.voters must contain a "
            "parseable set of controllers.")
    ids = {v.node_id for v in voters}
    shown = "Set(" + ", ".join(str(v.node_id) for v in voters) + ")"
    if voters and roles == {"broker"} and cfg.node_id in ids:
        raise QuorumConfigError(
            f"If process.roles contains just the 'broker' role, the node id {cfg.node_id} must "
            f"not be included in the set of voters controller.quorum.voters={shown}")
    if voters and "controller" in roles and cfg.node_id not in ids:
        raise QuorumConfigError(
            f"If process.roles contains the 'controller' role, the node id {cfg.node_id} must "
            f"be included in the set of voters controller.quorum.voters={shown}")
    _check_listeners(cfg, roles, protocols)
