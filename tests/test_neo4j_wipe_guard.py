"""The test fixtures empty the Neo4j database before each neo4j test: pointed at a server that
holds someone's data, they refuse, with the reason, instead of erasing it."""

from __future__ import annotations

import pytest

import conftest
from conftest import _Neo4jServer


@pytest.mark.neo4j
def test_a_server_holding_data_is_refused_not_emptied(
    neo4j_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import neo4j

    with neo4j.GraphDatabase.driver(neo4j_uri, auth=None) as driver:
        driver.execute_query("UNWIND range(1, 5) AS i CREATE (:SomeonesData {i: i})")
        monkeypatch.setattr(conftest, "WIPE_GUARD", 3)  # more than a test run leaves behind
        monkeypatch.setenv("EBB_TEST_NEO4J_URI", neo4j_uri)
        monkeypatch.delenv("EBB_TEST_NEO4J_WIPE", raising=False)
        guarded = _Neo4jServer()
        try:
            with pytest.raises(pytest.skip.Exception) as skipped:
                guarded.find()
        finally:
            guarded.close()
        reason = str(skipped.value)
        assert "holds 5 nodes" in reason and neo4j_uri in reason
        assert "EBB_TEST_NEO4J_WIPE=1" in reason and "neo4j-test-server start" in reason
        kept = driver.execute_query("MATCH (n:SomeonesData) RETURN count(n) AS c").records
        assert kept[0]["c"] == 5  # untouched

        monkeypatch.setenv("EBB_TEST_NEO4J_WIPE", "1")  # the owner says it may go
        allowed = _Neo4jServer()
        try:
            assert allowed.find() == neo4j_uri
            allowed.reset()
        finally:
            allowed.close()
        left = driver.execute_query("MATCH (n) RETURN count(n) AS c").records
        assert left[0]["c"] == 0
