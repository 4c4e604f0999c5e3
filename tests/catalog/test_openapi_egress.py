"""Egress rules for OpenAPI services: allow-list by host or network, private ranges only when listed."""

from __future__ import annotations

import pytest

from catalog.egress import EgressRefused, egress_check


def resolves_to(*addresses: str):
    """A fixed DNS answer (a real resolver can't be made to answer 10.x or a mixed set on demand)."""
    return lambda host, port: list(addresses)


def test_ip_literal_must_be_inside_a_listed_network():
    target = egress_check("http://127.0.0.1:8080/v1", allowed=["127.0.0.1/32"])
    assert str(target.address) == "127.0.0.1"
    assert target.pinned_url == "http://127.0.0.1:8080/v1"
    with pytest.raises(EgressRefused, match="not in SCOUT_UPSTREAM_ALLOWED_HOSTS"):
        egress_check("http://127.0.0.2/", allowed=["127.0.0.1/32"])
    with pytest.raises(EgressRefused, match="not in SCOUT_UPSTREAM_ALLOWED_HOSTS"):
        egress_check("http://8.8.8.8/", allowed=["api.example.com"])


def test_listed_name_resolving_to_loopback_is_refused_unless_the_network_is_listed():
    # The real resolver: localhost is a loopback address, which a listed name alone does not allow.
    with pytest.raises(EgressRefused, match="private, loopback or link-local"):
        egress_check("http://localhost:9/", allowed=["localhost"])
    target = egress_check("http://localhost:9/", allowed=["localhost", "127.0.0.0/8", "::1/128"])
    assert target.address.is_loopback


@pytest.mark.parametrize("answer", ["10.1.2.3", "169.254.169.254", "192.168.0.1", "fd00::1", "::ffff:127.0.0.1"])
def test_name_resolving_to_a_private_or_metadata_address_is_refused(answer):
    with pytest.raises(EgressRefused, match=f"resolves to .*{answer.split(':')[-1]}"):
        egress_check("https://api.example.com/", allowed=["api.example.com"], resolver=resolves_to(answer))


def test_public_answer_passes_and_is_pinned_with_host_kept():
    target = egress_check(
        "https://api.example.com:8443/v1?x=1", allowed=["*.example.com"], resolver=resolves_to("93.184.215.14")
    )
    assert target.pinned_url == "https://93.184.215.14:8443/v1?x=1"
    assert target.host_header == "api.example.com:8443"


def test_a_mixed_answer_is_refused():
    with pytest.raises(EgressRefused, match="10.0.0.5"):
        egress_check(
            "https://api.example.com/", allowed=["api.example.com"], resolver=resolves_to("93.184.215.14", "10.0.0.5")
        )


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://api.example.com/", "http:///nohost"])
def test_only_http_urls_with_a_host(url):
    with pytest.raises(EgressRefused, match="only http"):
        egress_check(url, allowed=["api.example.com", "0.0.0.0/0"])


@pytest.mark.parametrize(
    "answer",
    [
        "64:ff9b::a9fe:a9fe",  # NAT64 (RFC 6052) of 169.254.169.254: a NAT64 gateway connects there
        "64:ff9b::a00:5",  # NAT64 of 10.0.0.5
        "64:ff9b:1::a00:5",  # the local-use NAT64 prefix (RFC 8215): where it embeds the address is local
        "2002:a00:5::1",  # 6to4 of 10.0.0.5
        "::a00:5",  # IPv4-compatible (deprecated) 10.0.0.5
        "fec0::1",  # site-local (deprecated, RFC 3879): still the inside of some networks
        "feff:ffff::1",  # the top of fec0::/10
        "3fff::1",  # documentation (RFC 9637)
        "5f00::1",  # SRv6 segment identifier (RFC 9602)
        "ff0e::1",  # global-scope multicast
        "64:ff9b::e000:1",  # NAT64 of 224.0.0.1 (multicast)
    ],
)
def test_a_name_resolving_to_a_translated_private_address_is_refused(answer):
    # Python's ipaddress calls these ranges global; what decides is the IPv4 address a gateway translates to, and
    # ranges that are not public whatever Python says.
    with pytest.raises(EgressRefused, match="private, loopback or link-local"):
        egress_check("https://api.example.com/", allowed=["api.example.com"], resolver=resolves_to(answer))


def test_a_translated_public_address_passes():
    target = egress_check(
        "https://api.example.com/", allowed=["api.example.com"], resolver=resolves_to("64:ff9b::5db8:d70e")
    )
    assert target.pinned_url == "https://[64:ff9b::5db8:d70e]/"  # connected as resolved, judged as 93.184.215.14
