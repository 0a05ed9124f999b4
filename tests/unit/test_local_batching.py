"""How the in-process model lays out option branches in one batch (no model needed)."""

from traversals.llm.local import _prefix_tree


def test_shared_prefixes_are_one_batch_token_in_every_sequence_that_has_them():
    # ratings "0.0", "0.1", "1.0" as tokens after a boundary token 7: [7, 0, '.', d]
    dot = 99
    branches = [[7, 0, dot, 0], [7, 0, dot, 1], [7, 1, dot, 0]]
    tokens, positions, members, rows_at = _prefix_tree(branches, head=40)
    # 7, 0, '.' shared by the first two; 1, '.' for the third; last tokens never decoded
    assert tokens == [7, 0, dot, 1, dot]
    assert positions == [40, 41, 42, 41, 42]
    assert members == [[1, 2, 3], [1, 2], [1, 2], [3], [3]]
    # row r of a branch: the logits after its token r (what predicts token r + 1)
    assert rows_at == [[0, 1, 2], [0, 1, 2], [0, 3, 4]]


def test_branches_without_common_prefix_keep_their_own_tokens():
    tokens, positions, members, rows_at = _prefix_tree([[5, 6], [8, 9, 10]], head=0)
    assert tokens == [5, 8, 9] and positions == [0, 0, 1]
    assert members == [[1], [2], [2]] and rows_at == [[0], [1, 2]]
