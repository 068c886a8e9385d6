import random

from graphrag_lite.graph.cluster import build_graph, hierarchical_leiden


def planted_graph(groups=4, size=30, seed=1):
    rng = random.Random(seed)
    edges = []
    for g in range(groups):
        members = range(g * size, (g + 1) * size)
        edges += [(a, b) for a in members for b in members if a < b and rng.random() < 0.3]
    edges += [(rng.randrange(groups * size), rng.randrange(groups * size)) for _ in range(15)]
    edges = [(a, b) for a, b in edges if a != b]
    return build_graph(groups * size, edges, [1.0] * len(edges))


def test_hierarchy_is_nested_bounded_and_numbered_across_levels():
    graph = planted_graph()
    tree = hierarchical_leiden(graph, max_cluster_size=10, seed=42)
    by_id = {c.community: c for c in tree}
    assert sorted(by_id) == list(range(len(tree)))
    level0 = [c for c in tree if c.level == 0]
    assert sorted(v for c in level0 for v in c.members) == list(range(120))  # a partition of the graph
    assert len(level0) >= 4
    for c in tree:
        if c.parent >= 0:
            parent = by_id[c.parent]
            assert parent.level == c.level - 1 and set(c.members) <= set(parent.members)
            assert c.community in parent.children and c.community > parent.community
        if c.children:  # children partition their parent (a large leaf is one Leiden could not split)
            assert sorted(v for k in c.children for v in by_id[k].members) == sorted(c.members)
    assert max(c.level for c in tree) >= 1


def test_same_seed_same_communities():
    graph = planted_graph()
    first = [(c.level, c.members) for c in hierarchical_leiden(graph, 10, seed=7)]
    assert first == [(c.level, c.members) for c in hierarchical_leiden(graph, 10, seed=7)]


def test_every_component_is_clustered_by_default_and_loose_entities_are_grouped_as_given():
    graph = build_graph(6, [(0, 1), (1, 2), (2, 0), (3, 4)], [1.0] * 4)
    level0 = [c.members for c in hierarchical_leiden(graph, 10, 1) if c.level == 0]
    assert sorted(v for members in level0 for v in members) == [0, 1, 2, 3, 4]  # a second component too
    assert [0, 1, 2] in level0 and [3, 4] in level0  # components are never mixed
    everything = hierarchical_leiden(graph, 2, 1, loose=[[5]])
    assert sorted(v for c in everything if c.level == 0 for v in c.members) == list(range(6))
    lcc = hierarchical_leiden(graph, 10, 1, use_lcc=True, loose=[[5]])  # GraphRAG's way: the rest is left out
    assert sorted(v for c in lcc if c.level == 0 for v in c.members) == [0, 1, 2]


def test_loose_groups_keep_a_text_units_entities_together_and_are_never_split():
    from graphrag_lite.graph.final_tables import loose_groups

    units = [["u2"], ["u1"], ["u1"], ["u3"], ["u1"], [], ["u2"]]
    degree = [0, 0, 0, 1, 0, 0, 0]
    groups = loose_groups(units, degree, size=3)
    # u1's three entities stay together; a group is never larger than 3 (u2's two do not fit beside them)
    assert groups == [[5], [1, 2, 4], [0, 6]]
    assert loose_groups([["a"], ["b"], ["c"]], [0, 0, 0], size=3) == [[0, 1, 2]]  # small units share a group
    graph = build_graph(7, [(3, 3)], [1.0])
    tree = hierarchical_leiden(graph, 2, 1, loose=groups)
    assert all(c.level == 0 for c in tree if set(c.members) & {0, 1, 2, 4, 5, 6})


# ---------------------------------------------------------------- across updates (issue 15)


class DictMemo(dict):
    def put(self, key, kind, value):
        self[key] = value


def numbered(tree, names):
    return {(c.level, frozenset(names[v] for v in c.members)): c.community for c in tree}


def grown(graph, extra_edges):
    """The graph with one more vertex, joined to the given ones."""
    edges = graph.get_edgelist() + [(graph.vcount(), v) for v in extra_edges]
    return build_graph(graph.vcount() + 1, edges, [1.0] * len(edges))


def test_an_update_keeps_the_communities_and_numbers_of_what_it_did_not_touch():
    from graphrag_lite.graph.cluster import Previous

    graph = planted_graph(groups=6, size=12, seed=3)
    names = [f"e{v}" for v in range(graph.vcount() + 1)]
    before = hierarchical_leiden(graph, 10, 5, names=names[:-1])
    previous = Previous.from_rows([(c.level, c.community, [names[v] for v in c.members]) for c in before])
    after = hierarchical_leiden(grown(graph, [0, 1]), 10, 5, names=names, previous=previous)
    old, new = numbered(before, names), numbered(after, names)
    kept = set(old) & set(new)
    assert len(kept) >= len(old) - 3  # only the new vertex's community and its parent may change
    assert all(old[key] == new[key] for key in kept)  # and the others keep their numbers
    home = next(c for c in after if c.level == 0 and names.index("e0") in c.members)
    assert home.community in {c.community for c in before if c.level == 0 and 0 in c.members}  # most overlap
    numbers = [c.community for c in after]
    assert len(numbers) == len(set(numbers))  # unique across levels
    assert all(n > max(old.values()) for key, n in new.items() if key not in kept and n not in old.values())


def test_a_graph_clustered_before_gets_its_remembered_communities_and_numbers():
    from graphrag_lite.graph.cluster import Previous

    graph = planted_graph(groups=3, size=12, seed=4)
    names = [f"e{v}" for v in range(graph.vcount() + 1)]
    memo = DictMemo()
    first = hierarchical_leiden(graph, 10, 5, names=names[:-1], memo=memo)
    assert len(memo) == 1
    bigger = grown(graph, [0, 13, 26])  # the update: one vertex joins all three groups
    previous = Previous.from_rows([(c.level, c.community, [names[v] for v in c.members]) for c in first])
    middle = hierarchical_leiden(bigger, 10, 5, names=names, previous=previous, memo=memo)
    assert len(memo) == 2
    back = Previous.from_rows([(c.level, c.community, [names[v] for v in c.members]) for c in middle])
    again = hierarchical_leiden(graph, 10, 5, names=names[:-1], previous=back, memo=memo)  # the vertex is gone
    assert [(c.community, c.level, c.parent, c.members, c.children) for c in again] == \
        [(c.community, c.level, c.parent, c.members, c.children) for c in first]


def test_a_report_digest_ignores_degrees_but_not_facts_and_the_numbers_citations_use():
    import pandas as pd

    from graphrag_lite.graph.report_context import ContextBuilder

    def builder(description="a harbour town", degree=3, number=0):
        entities = pd.DataFrame({"id": ["a", "b"], "human_readable_id": [number, number + 1],
                                 "title": ["PORT SEDLEY", "ELLIS VARNE"], "description": [description, "a captain"],
                                 "degree": [degree, 1]})
        relationships = pd.DataFrame({"id": ["r"], "human_readable_id": [number], "source": ["ELLIS VARNE"],
                                      "target": ["PORT SEDLEY"], "description": ["lives in"],
                                      "combined_degree": [degree + 1]})
        claims = pd.DataFrame(columns=["human_readable_id", "subject_id", "type", "status", "description"])
        return ContextBuilder(entities, relationships, claims, 8000)

    def digest(b, salt="model|prompt"):
        return b.digest(["a", "b"], ["r"], b.build(["a", "b"], ["r"]), [], salt)

    same = digest(builder())
    assert digest(builder(degree=9)) == same  # the graph grew elsewhere: the report still holds
    assert digest(builder(number=40)) != same  # its citations would point at other rows
    assert digest(builder(description="a harbour town with a lighthouse")) != same
    assert digest(builder(), salt="other model|prompt") != same


def test_settled_vertices_keep_their_communities_exactly():
    from graphrag_lite.graph.cluster import Previous

    clique = [(a, b) for a in range(6) for b in range(a + 1, 6)]
    graph = build_graph(12, clique + [(a + 6, b + 6) for a, b in clique], [1.0] * 2 * len(clique))
    names = [f"e{v}" for v in range(12)]
    halves = [(0, 0, names[0:3]), (0, 1, names[3:6]), (0, 2, names[6:9]), (0, 3, names[9:12])]  # not optimal

    def level0(previous):
        return sorted(sorted(c.members) for c in hierarchical_leiden(graph, 10, 1, names=names, previous=previous)
                      if c.level == 0)

    assert level0(Previous.from_rows(halves)) == [list(range(6)), list(range(6, 12))]  # Leiden improves on them
    settled = Previous.from_rows(halves)
    settled.settled = frozenset(names[:6])  # the first clique's relationships did not change since that partition
    assert level0(settled) == [[0, 1, 2], [3, 4, 5], list(range(6, 12))]


def test_an_entity_is_settled_only_when_its_relationships_and_weights_are_as_before():
    from graphrag_lite.graph.final_tables import settled_entities

    graph = build_graph(5, [(0, 1), (1, 2), (3, 4)], [1.0, 2.0, 1.0])
    ids, rels = ["a", "b", "c", "d", "e"], ["ab", "bc", "de"]
    before = {"a": {("ab", 1.0)}, "b": {("ab", 1.0), ("bc", 2.0)}, "c": {("bc", 2.0)},
              "d": {("de", 3.0)}, "e": {("de", 3.0)}}  # d-e weighed 3 then
    assert settled_entities(graph, ids, rels, before) == {"a", "b", "c"}
    before["c"] = before["c"] | {("cx", 1.0)}  # c also had an edge that is gone now
    assert settled_entities(graph, ids, rels, before) == {"a", "b"}
    assert settled_entities(graph, ids, rels, None) == frozenset()
