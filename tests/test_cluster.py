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
    from graphrag_lite.stages.cluster_graph import loose_groups

    units = [["u2"], ["u1"], ["u1"], ["u3"], ["u1"], [], ["u2"]]
    degree = [0, 0, 0, 1, 0, 0, 0]
    groups = loose_groups(units, degree, size=3)
    # u1's three entities stay together; a group is never larger than 3 (u2's two do not fit beside them)
    assert groups == [[5], [1, 2, 4], [0, 6]]
    assert loose_groups([["a"], ["b"], ["c"]], [0, 0, 0], size=3) == [[0, 1, 2]]  # small units share a group
    graph = build_graph(7, [(3, 3)], [1.0])
    tree = hierarchical_leiden(graph, 2, 1, loose=groups)
    assert all(c.level == 0 for c in tree if set(c.members) & {0, 1, 2, 4, 5, 6})
