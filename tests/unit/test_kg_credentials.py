"""Credentials for SPARQL endpoints (traversals.kg.credentials, ``--kg-header``): how they
are read, which endpoint each goes to, and that no password or header value is shown. The
requests themselves are tested against a real server behind an authenticating proxy
(tests/integration/test_sparql_auth.py)."""

from __future__ import annotations

import pytest

from traversals.errors import BadInput
from traversals.kg.credentials import (
    assign_kg_headers,
    cache_identity,
    check_headers,
    parse_kg_header,
    shown_kg_spec,
    split_userinfo,
)
from traversals.headers import shown_header
from traversals.options import expand_environment, redact_secrets


def test_user_info_is_taken_out_of_the_url_and_decoded() -> None:
    assert split_userinfo("https://al%40ice:s%40cret%3A1@host:8443/sparql?x=1") == (
        "https://host:8443/sparql?x=1", "al@ice", "s@cret:1")
    assert split_userinfo("http://token@host/q") == ("http://host/q", "token", "")
    assert split_userinfo("http://host/q") == ("http://host/q", None, "")


@pytest.mark.parametrize(("spec", "shown"), [
    ("http://a:pw@h/q", "http://a:***@h/q"),
    ("movies=https://a:pw@h/q", "movies=https://a:***@h/q"),
    ("m=sparql:http://a:pw@h/q", "m=sparql:http://a:***@h/q"),
    ("wikidata:https://a:pw@h/q", "wikidata:https://a:***@h/q"),
    ("http://h/q?access_token=T0", "http://h/q?access_token=***"),
    ("http://h/q", "http://h/q"),
    ("movies=kb.txt", "movies=kb.txt"),
    ("wikidata", "wikidata"),
])
def test_a_kg_spec_is_shown_without_its_password(spec, shown) -> None:
    assert shown_kg_spec(spec) == shown


def test_kg_header_values_name_their_kg_and_keep_equals_and_colons() -> None:
    assert parse_kg_header("Authorization: Bearer abc") == (None, "Authorization", "Bearer abc")
    assert parse_kg_header("movies=Authorization: Basic YWxpY2U6cHc=") == ("movies", "Authorization", "Basic YWxpY2U6cHc=")
    assert parse_kg_header("X-Api-Key:k:1") == (None, "X-Api-Key", "k:1")
    with pytest.raises(BadInput, match=r"a header is given as 'Name: value'.*this one has no colon") as e:
        parse_kg_header("Bearer secret-token")
    assert "secret-token" not in str(e.value)  # it may be the secret alone
    with pytest.raises(BadInput, match="this one has no name"):
        parse_kg_header(": secret-token")
    assert shown_header("movies=Authorization: Bearer abc") == "movies=Authorization: ***"
    assert shown_header("Authorization: ${TOKEN}") == "Authorization: ${TOKEN}"  # names no secret


def test_headers_are_checked_without_showing_their_values() -> None:
    assert check_headers({"X-Api-Key": " k "}, "here") == {"X-Api-Key": "k"}
    for headers, said in [
        ({"Bad Name": "v"}, "not an HTTP header name"),
        ({"X-Key": "line\r\nInjected: yes"}, "one line of printable ASCII"),
        ({"X-Key": "café"}, "one line of printable ASCII"),
        ({"X-Key": " "}, "empty value"),
        ({"Accept": "text/csv"}, "set by the SPARQL client itself"),
        ({"User-Agent": "me"}, "use --user-agent"),
        ({"X-Key": "a", "x-key": "b"}, "given twice"),
    ]:
        with pytest.raises(BadInput, match=said) as e:
            check_headers(headers, "here")
        assert "Injected" not in str(e.value) and "café" not in str(e.value)


def test_a_header_goes_to_one_endpoint_only() -> None:
    specs = ["kb.txt", "ep=http://h/q", "other=http://g/q"]
    endpoints, names = [False, True, True], [None, "ep", "other"]
    got = assign_kg_headers(specs, [("ep", "Authorization", "Bearer t"), ("other", "X-Key", "k")], endpoints, names)
    assert got == [{}, {"Authorization": "Bearer t"}, {"X-Key": "k"}]
    assert assign_kg_headers(specs[:2], [(None, "X-Key", "k")], endpoints[:2], names[:2]) == [{}, {"X-Key": "k"}]
    for header, said in [
        ((None, "X-Key", "k"), "2 SPARQL endpoints are given; say which one"),
        (("nope", "X-Key", "k"), "no --kg is named 'nope'"),
    ]:
        with pytest.raises(BadInput, match=said):
            assign_kg_headers(specs, [header], endpoints, names)
    with pytest.raises(BadInput, match="given twice"):
        assign_kg_headers(specs, [("ep", "X-Key", "a"), ("ep", "x-key", "b")], endpoints, names)


def test_the_cache_key_names_the_user_and_digests_the_headers() -> None:
    plain = cache_identity("http://h/q", None, {})
    assert plain == "http://h/q"
    assert cache_identity("http://h/q", "al ice", {}) == "http://al%20ice@h/q"
    one = cache_identity("http://h/q", None, {"Authorization": "Bearer t1"})
    two = cache_identity("http://h/q", None, {"authorization": "Bearer t2"})
    assert one != two and "t1" not in one and one.startswith("http://h/q#headers=")
    assert one == cache_identity("http://h/q", None, {"AUTHORIZATION": "Bearer t1"})


def test_environment_references_are_expanded_at_the_edge() -> None:
    env = {"TOKEN": "abc", "EMPTY": ""}
    assert expand_environment("Authorization: Bearer ${TOKEN}", env) == "Authorization: Bearer abc"
    assert expand_environment("X-Key: a$b $TOKEN", env) == "X-Key: a$b $TOKEN"  # only ${NAME}
    with pytest.raises(BadInput, match="the environment variable MISSING is not set"):
        expand_environment("Authorization: Bearer ${MISSING}", env)
    with pytest.raises(BadInput, match="the environment variable EMPTY is empty"):
        expand_environment("Authorization: Bearer ${EMPTY}", env)


def test_recorded_command_lines_hide_header_values_and_passwords_of_named_kgs() -> None:
    argv = ["eval", "--kg", "m=http://a:pw@h/q", "--kg=sparql:http://a:pw@h/q", "--kg-header",
            "m=Authorization: Bearer xyz", "--kg-header=X-Key: abc", "--kg-h", "A: ${T}", "--llm-url", "http://u:p@x/v1"]
    assert redact_secrets(argv) == [
        "eval", "--kg", "m=http://a:***@h/q", "--kg=sparql:http://a:***@h/q", "--kg-header",
        "m=Authorization: ***", "--kg-header=X-Key: ***", "--kg-h", "A: ${T}", "--llm-url", "http://u:***@x/v1"]


def test_a_wikidata_mirror_takes_headers_and_the_public_services_none() -> None:
    from traversals.kg.factory import check_kg_spec, headers_for

    assert check_kg_spec("wd=wikidata:https://h/sparql") == ("wikidata", "https://h/sparql", "wd")
    assert headers_for(["wikidata:https://h/sparql"], ["X-Key: k"]) == [{"X-Key": "k"}]
    assert headers_for(["wikidata", "m=wikidata:https://h/q"], ["m=X-Key: k"]) == [{}, {"X-Key": "k"}]
    with pytest.raises(BadInput, match="the public wikidata take none"):
        headers_for(["wikidata"], ["X-Key: k"])
    with pytest.raises(BadInput, match="wikidata:URL names a Wikidata mirror's SPARQL endpoint by an http"):
        check_kg_spec("wikidata:query.example.org")


def test_a_token_command_goes_to_one_endpoint_and_runs_nothing_until_asked() -> None:
    from traversals.kg.factory import credentials_for

    specs = ["kb.txt", "ep=http://h/q", "other=http://g/q"]
    got = credentials_for(specs, [], ["ep=gcloud auth print-access-token"])
    assert [t.command if t else None for _, t in got] == [None, "gcloud auth print-access-token", None]
    assert got[1][1].fetches == 0  # run at the endpoint's first query, not here
    # a command that starts with an environment assignment is a command, not a KG's name
    [(_, token)] = credentials_for(["http://h/q"], [], ["TOKEN_SCOPE=x vault read -field=t secret/kg"])
    assert token.command == "TOKEN_SCOPE=x vault read -field=t secret/kg"
    for specs_, commands, said in [
        (specs, ["print-token"], "2 SPARQL endpoints are given; say which one"),
        (["kb.txt"], ["print-token"], "no --kg is one"),
        (["wikidata"], ["print-token"], "the public wikidata take none"),
        (["f=kb.txt", "http://h/q"], ["f=print-token"], "--kg f is not a SPARQL endpoint"),
        (["http://h/q"], ["a", "b"], "given twice"),
        (["http://h/q"], [" "], "the command is empty"),
        (["http://u:pw@h/q"], ["print-token"], "a user in the URL or an --kg-header Authorization"),
    ]:
        with pytest.raises(BadInput, match=said):
            credentials_for(specs_, [], commands)
    with pytest.raises(BadInput, match="sets the Authorization header"):
        credentials_for(["http://h/q"], ["Authorization: Bearer x"], ["print-token"])


async def test_a_token_in_the_endpoints_query_is_in_no_name_message_or_cache_key() -> None:
    from traversals.errors import KGUnavailable
    from traversals.kg.sparql import SparqlKG

    kg = SparqlKG("http://127.0.0.1:9/query?access_token=TOPSECRET&x=1", max_retries=0)
    try:
        assert kg.name == kg.shown_endpoint == "http://127.0.0.1:9/query?access_token=***&x=1"
        assert "TOPSECRET" not in repr(kg) and "TOPSECRET" not in kg._cache_key
        other = SparqlKG("http://127.0.0.1:9/query?access_token=OTHER&x=1")
        assert other._cache_key != kg._cache_key  # another token may be shown other data
        assert "TOPSECRET" not in cache_identity("http://127.0.0.1:9/q?key=TOPSECRET", "alice", {})  # a user too
        with pytest.raises(KGUnavailable) as e:  # nothing listens on port 9
            await kg.search("Heat")
        assert "access_token=***" in str(e.value) and "TOPSECRET" not in str(e.value)
    finally:
        await kg.close()


@pytest.mark.parametrize("url", ["http://alice:Pa55#word@db.example/sparql", "http://alice:pa/ss@h:80/q",
                                 "http://alice:Pa55[word@127.0.0.1:7878/query"])
def test_a_password_not_percent_encoded_is_refused_without_showing_it(url) -> None:
    from traversals.kg.sparql import SparqlKG

    with pytest.raises(BadInput) as e:
        SparqlKG(url)
    assert "Pa55" not in str(e.value) and "pa/ss" not in str(e.value) and "percent-encoded" in str(e.value)
    assert "***@" in str(e.value)
