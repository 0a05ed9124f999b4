"""A SPARQL endpoint (a real Oxigraph server) counts the edges each source lost.

Two sources expanded together, the cap cutting both: ``get_edges`` counts their edges
with one ``GROUP BY`` (the same capped scan as the total) and reports each one's loss in
``Edges.omitted_by_source``, as the embedded store does; past ``count_limit`` the count
is a sample, and only the total is said."""

from __future__ import annotations

import pytest

from traversals.kg import iris
from traversals.kg.base import Entity, Relation
from traversals.kg.sparql import SparqlKG
from traversals.kg.factory import open_kg
from traversals.llm.base import Usage
from traversals.search.kgset import KGSet

from .servers import OxigraphServer, load_store

pytestmark = [pytest.mark.server, pytest.mark.timeout(300)]

ALPHA, BETA, GAMMA = 60, 30, 3


def triples() -> str:
    lines = [f"Alpha|made|a{i:03d}" for i in range(ALPHA)] + [f"Beta|made|b{i:03d}" for i in range(BETA)]
    lines += [f"Gamma|made|g{i:03d}" for i in range(GAMMA)]
    lines += [f"x{i:03d}|in|Alpha" for i in range(12)] + [f"y{i:03d}|in|Beta" for i in range(8)]
    return "\n".join(lines) + "\n"


def nt(text: str) -> str:
    out, names = [], set()
    for line in text.splitlines():
        s, r, o = line.split("|")
        out.append(f"<{iris.entity_iri(s)}> <{iris.relation_iri(r)}> <{iris.entity_iri(o)}> .")
        names.update((s, o))
    out += [f'<{iris.entity_iri(n)}> <{iris.RDFS_LABEL}> "{n}" .' for n in sorted(names)]
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("omitted-oxigraph")
    data = root / "kb.nt"
    data.write_text(nt(triples()), encoding="utf-8")
    load_store(root / "db", [data])
    srv = OxigraphServer(root / "db", root / "server.log")
    srv.root = root
    yield srv
    srv.stop()


def ent(name: str) -> Entity:
    return Entity(iris.entity_iri(name), name)


def rel(name: str, inverse: bool = False) -> Relation:
    return Relation(name, iris.name_label(name), inverse=inverse, iri=iris.relation_iri(name))


async def test_each_source_of_a_cut_expansion_is_counted(server) -> None:
    alpha, beta, gamma = ent("Alpha"), ent("Beta"), ent("Gamma")
    async with SparqlKG(server.url) as kg:
        got = await kg.get_edges([alpha, beta], rel("made"), limit=50)
        assert len(got.edges) == 50 and got.omitted == ALPHA + BETA - 50
        # the first 50 by label: Alpha's 50 of 60, none of Beta's 30
        assert dict(got.omitted_by_source) == {alpha.id: 10, beta.id: 30}
        got = await kg.get_edges([gamma, beta, alpha], rel("made"), limit=70)
        assert got.omitted == ALPHA + BETA + GAMMA - 70
        assert dict(got.omitted_by_source) == {beta.id: 20, gamma.id: 3}  # by label: Alpha's 60, Beta's first 10
        back = await kg.get_edges([beta, alpha], rel("in", inverse=True), limit=15)
        assert back.omitted == 5 and dict(back.omitted_by_source) == {beta.id: 5}
        # nothing cut, one source: as before
        assert dict((await kg.get_edges([alpha, beta], rel("made"), limit=100)).omitted_by_source) == {}


async def test_a_single_source_sends_the_same_queries_as_before(server) -> None:
    async with SparqlKG(server.url) as kg:
        sent: list[str] = []
        select = kg.select

        async def recording(query, *args, **kw):
            sent.append(query)
            return await select(query, *args, **kw)

        kg.select = recording  # type: ignore[method-assign]
        one = await kg.get_edges([ent("Beta")], rel("made"), limit=10)
        assert one.omitted == 20 and dict(one.omitted_by_source) == {ent("Beta").id: 20}
        assert kg.stats.queries == 4  # edges, count, the label-ordered choice, labels
        (count,) = [q for q in sent if "COUNT(*)" in q]
        assert count.startswith("SELECT (COUNT(*) AS ?c) WHERE") and "GROUP BY" not in count
        sent.clear()
        await kg.get_edges([ent("Beta"), ent("Alpha")], rel("made"), limit=10)
        (count,) = [q for q in sent if "COUNT(*)" in q]
        assert count.startswith("SELECT ?s (COUNT(*) AS ?c) WHERE") and count.endswith("GROUP BY ?s")


async def test_past_count_limit_only_the_total_is_said(server) -> None:
    alpha, beta = ent("Alpha"), ent("Beta")
    async with SparqlKG(server.url, count_limit=40) as kg:
        got = await kg.get_edges([alpha, beta], rel("made"), limit=20)
        # the count stopped at 40 of 90: a lower bound, whose split would be a sample
        assert got.omitted == 40 - 20 and dict(got.omitted_by_source) == {}
        kgs = KGSet([kg], max_edges=20)
        through = await kgs.get_edges([alpha, beta], rel("made"), Usage())
        assert through.omitted == 20 and through.omitted_of(alpha.id) is None


async def test_the_endpoint_and_the_embedded_store_agree(server, tmp_path) -> None:
    p = tmp_path / "kb.txt"
    p.write_text(triples(), encoding="utf-8")
    store = open_kg(str(p))  # the same IRIs (traversals.kg.iris) as the served copy
    made, back = rel("made"), rel("in", inverse=True)
    async with SparqlKG(server.url) as kg:
        for limit in (0, 5, 33, 60, 75, 93, 100):
            for relation, names in ((made, ["Gamma", "Alpha", "Beta"]), (back, ["Alpha", "Beta"])):
                remote = await kg.get_edges([ent(n) for n in names], relation, limit=limit)
                local = await store.get_edges([ent(n) for n in names], relation, limit=limit)
                assert remote.omitted == local.omitted, (relation.id, limit)
                assert dict(remote.omitted_by_source) == dict(local.omitted_by_source), (relation.id, limit)
                assert [(e.subject.id, e.object.id) for e in remote.edges] == [
                    (e.subject.id, e.object.id) for e in local.edges]
    await store.close()
