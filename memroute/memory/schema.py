"""Versioned migrations, run at open under an advisory lock."""

from __future__ import annotations

import re

from memroute._log import get_logger
from psycopg import AsyncConnection

from memroute.errors import EmbedderMismatchError, InvalidInputError
from memroute.memory.items import DEFAULT_TENANT

log = get_logger(__name__)

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_LOCK_ID = 0x6D656D726F757465  # "memroute"
# PostgreSQL's reserved and type/function-name keywords (pg_get_keywords() catcode R and T):
# none can name a schema unquoted. tests/test_input_validation.py checks the list against the server.
RESERVED_WORDS = frozenset("""
    all analyse analyze and any array as asc asymmetric authorization binary both case cast
    check collate collation column concurrently constraint create cross current_catalog
    current_date current_role current_schema current_time current_timestamp current_user
    default deferrable desc distinct do else end except false fetch for foreign freeze from
    full grant group having ilike in initially inner intersect into is isnull join lateral
    leading left like limit localtime localtimestamp natural not notnull null offset on only or
    order outer overlaps placing primary references returning right select session_user similar
    some symmetric system_user table tablesample then to trailing true union unique user using
    variadic verbose when where window with
""".split())
_SYSTEM_SCHEMA = re.compile(r"^(pg_.*|information_schema)$")
# Past one machine (docs/scaling.md): every table of a store but the reference tables is a
# data table, distributed by this column, which every primary key, unique index and foreign
# key of a data table holds; the reference tables are small and the same on every node.
DISTRIBUTION_COLUMN = "scope_key"
REFERENCE_TABLES = ("schema_version", "store_info", "api_keys")


def check_identifier(name: str) -> str:
    """``name`` if it can name memroute's schema, else `InvalidInputError`: 1-63 lowercase
    letters, digits and '_', not a reserved word, not a system schema (pg_*, information_schema)."""
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        raise InvalidInputError(
            f"invalid schema name {name!r:.80}: 1-63 lowercase letters, digits, '_'")
    if name in RESERVED_WORDS:
        raise InvalidInputError(f"invalid schema name {name!r}: a PostgreSQL reserved word")
    if _SYSTEM_SCHEMA.fullmatch(name):
        raise InvalidInputError(
            f"invalid schema name {name!r}: pg_* and information_schema are PostgreSQL's own")
    return name


def _migrations(schema: str, dim: int, buckets: int) -> list[str]:
    """Migration N is element N-1. Append only; never edit a released one."""
    s = schema
    return [
        f"""
        CREATE TABLE {s}.episodes (
            scope_key   text        NOT NULL,
            org_id      text        NOT NULL,
            project_id  text        NOT NULL,
            user_id     text,
            agent_id    text,
            uid         text        NOT NULL,
            seq         bigserial   NOT NULL,
            session_id  text        NOT NULL,
            producer    text        NOT NULL,
            produced_at timestamptz NOT NULL,
            content     text        NOT NULL,
            metadata    jsonb       NOT NULL DEFAULT '{{}}',
            created_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (scope_key, uid)
        );
        CREATE INDEX episodes_session_time ON {s}.episodes (scope_key, session_id, produced_at, seq);
        CREATE INDEX episodes_time ON {s}.episodes (scope_key, produced_at);
        CREATE TABLE {s}.sentences (
            scope_key   text        NOT NULL,
            episode_uid text        NOT NULL,
            idx         int         NOT NULL,
            text        text        NOT NULL,
            embedding   vector({dim}) NOT NULL,
            session_id  text        NOT NULL,
            producer    text        NOT NULL,
            produced_at timestamptz NOT NULL,
            metadata    jsonb       NOT NULL DEFAULT '{{}}',
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
            PRIMARY KEY (scope_key, episode_uid, idx),
            FOREIGN KEY (scope_key, episode_uid)
                REFERENCES {s}.episodes (scope_key, uid) ON DELETE CASCADE
        );
        CREATE INDEX sentences_embedding ON {s}.sentences
            USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
        CREATE INDEX sentences_scope ON {s}.sentences (scope_key, session_id, produced_at);
        CREATE INDEX sentences_tsv ON {s}.sentences USING gin (tsv);
        """,
        # API keys of the service (memroute.service.keys): only a SHA-256 of each secret is
        # stored; a key is bound to one org and optionally to some projects and users.
        f"""
        CREATE TABLE {s}.api_keys (
            key_id        text        PRIMARY KEY,
            secret_sha256 bytea       NOT NULL,
            org_id        text        NOT NULL,
            project_ids   text[],
            user_ids      text[],
            name          text        NOT NULL DEFAULT '',
            created_at    timestamptz NOT NULL DEFAULT now(),
            revoked_at    timestamptz
        );
        """,
        # 3: the named entities of each sentence (memroute.memory.entity_sql); NULL until
        # extracted, so a store migrated from version 1 works before `memroute db
        # backfill-entities` fills them.
        f"""
        ALTER TABLE {s}.sentences ADD COLUMN entity_keys text[];
        ALTER TABLE {s}.sentences ADD COLUMN entities jsonb;
        CREATE INDEX sentences_entity_keys ON {s}.sentences USING gin (entity_keys);
        """,
        # 4: a scope's producers (its conversation's speakers) read by a skip scan
        # (memroute.memory.lookup.scope_producers), one index probe per producer.
        f"""
        CREATE INDEX episodes_scope_producer ON {s}.episodes (scope_key, producer);
        """,
        # 5: a sentence row (~2.3 kB with its 384-d vector) stays whole in its page up to
        # 8,160 bytes instead of 2,032: the search reads its vector without a TOAST lookup.
        # Rows written before keep their layout until the table is rewritten.
        f"""
        ALTER TABLE {s}.sentences SET (toast_tuple_target = 8160);
        """,
        _store_items_migration(s),
        # 7: a scope of 5,000 sentences or more is searched through indexes of its own
        # (partial: HNSW of its vectors, GIN of its full-text column and entity keys), a
        # smaller one by an exact scan of its rows, and the vector index of the whole table
        # goes: a search no longer passes over other tenants' sentences (schema 8 gives each
        # large scope a leaf of its own instead). On a big store this builds the large
        # scopes' indexes, about the time of an HNSW build of their sentences
        # (docs/benchmarks.md); writes wait meanwhile.
        f"""
        SET LOCAL maintenance_work_mem = '1GB';
        DO $$
        DECLARE
            large text[] := ARRAY(SELECT scope_key FROM {s}.sentences GROUP BY scope_key
                                  HAVING count(*) >= 5000);
            k text;
        BEGIN
            FOREACH k IN ARRAY large LOOP
                EXECUTE format('CREATE INDEX %I ON {s}.sentences USING hnsw '
                               '(embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128) '
                               'WHERE scope_key = %L', 'sentences_embedding_' || k, k);
                EXECUTE format('CREATE INDEX %I ON {s}.sentences USING gin (tsv) '
                               'WHERE scope_key = %L', 'sentences_tsv_' || k, k);
                EXECUTE format('CREATE INDEX %I ON {s}.sentences USING gin (entity_keys) '
                               'WHERE scope_key = %L', 'sentences_entity_keys_' || k, k);
            END LOOP;
        END $$;
        DROP INDEX IF EXISTS {s}.sentences_embedding;
        """,
        _partitioned_sentences_migration(s, dim, buckets),
    ]


def _partitioned_sentences_migration(s: str, dim: int, buckets: int) -> str:
    """8: the sentences table is partitioned by scope (memroute.memory.tiers): by the hash of
    ``scope_key`` into ``buckets`` buckets, each by the ``scope_key`` itself; a scope with
    its own indexes (schema 7) gets a leaf of its own with them, the others share their
    bucket's default leaf. Every statement names one scope key, so the planner reads one
    leaf and its indexes, not every large scope's. The rows are copied in scope order (a
    scope's rows together), which on a big store takes about the time of writing them again
    and building their indexes (docs/benchmarks.md); writes wait meanwhile."""
    t = "'sentences_b' || lpad(b::text, 3, '0')"
    return f"""
        SET LOCAL maintenance_work_mem = '1GB';
        INSERT INTO {s}.store_info VALUES ('scope_buckets', '{buckets}');
        CREATE TEMP TABLE _memroute_large ON COMMIT DROP AS
            SELECT substr(c.relname, 21) AS key
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = '{s}.sentences'::regclass AND i.indisvalid
              AND c.relname ~ '^sentences_embedding_[0-9a-f]{{32}}$';
        DO $$
        DECLARE
            name text;
        BEGIN
            FOR name IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                        WHERE i.indrelid = '{s}.sentences'::regclass AND NOT i.indisprimary LOOP
                EXECUTE format('DROP INDEX {s}.%I', name);
            END LOOP;
        END $$;
        ALTER TABLE {s}.sentences RENAME TO sentences_v7;
        ALTER TABLE {s}.sentences_v7 RENAME CONSTRAINT sentences_pkey TO sentences_v7_pkey;
        CREATE TABLE {s}.sentences (
            scope_key   text        NOT NULL,
            episode_uid text        NOT NULL,
            idx         int         NOT NULL,
            text        text        NOT NULL,
            embedding   vector({dim}) NOT NULL,
            session_id  text        NOT NULL,
            producer    text        NOT NULL,
            produced_at timestamptz NOT NULL,
            metadata    jsonb       NOT NULL DEFAULT '{{}}',
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
            entity_keys text[],
            entities    jsonb,
            PRIMARY KEY (scope_key, episode_uid, idx)
        ) PARTITION BY HASH (scope_key);
        DO $$
        DECLARE
            k text;
            b int;
        BEGIN
            FOR b IN 0..{buckets} - 1 LOOP
                EXECUTE format('CREATE TABLE {s}.%I PARTITION OF {s}.sentences '
                               'FOR VALUES WITH (MODULUS {buckets}, REMAINDER %s) '
                               'PARTITION BY LIST (scope_key)', {t}, b);
                EXECUTE format('CREATE TABLE {s}.%I PARTITION OF {s}.%I DEFAULT '
                               'WITH (toast_tuple_target = 8160)', {t} || '_shared', {t});
            END LOOP;
            FOR k IN SELECT key FROM _memroute_large LOOP
                SELECT r INTO b FROM generate_series(0, {buckets} - 1) r
                WHERE satisfies_hash_partition('{s}.sentences'::regclass, {buckets}, r, k);
                EXECUTE format('CREATE TABLE {s}.%I PARTITION OF {s}.%I FOR VALUES IN (%L) '
                               'WITH (toast_tuple_target = 8160)', 'sentences_' || k, {t}, k);
            END LOOP;
        END $$;
        INSERT INTO {s}.sentences (scope_key, episode_uid, idx, text, embedding, session_id,
                                   producer, produced_at, metadata, entity_keys, entities)
            SELECT scope_key, episode_uid, idx, text, embedding, session_id, producer,
                   produced_at, metadata, entity_keys, entities
            FROM {s}.sentences_v7 ORDER BY scope_key, episode_uid, idx;
        DROP TABLE {s}.sentences_v7;
        DO $$
        DECLARE
            k text;
        BEGIN
            FOR k IN SELECT key FROM _memroute_large LOOP
                EXECUTE format('CREATE INDEX %I ON {s}.%I USING btree '
                               '(scope_key, session_id, produced_at)',
                               'sentences_scope_' || k, 'sentences_' || k);
                EXECUTE format('CREATE INDEX %I ON {s}.%I USING gin (tsv)',
                               'sentences_tsv_' || k, 'sentences_' || k);
                EXECUTE format('CREATE INDEX %I ON {s}.%I USING gin (entity_keys)',
                               'sentences_entity_keys_' || k, 'sentences_' || k);
                EXECUTE format('CREATE INDEX %I ON {s}.%I USING hnsw '
                               '(embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128)',
                               'sentences_embedding_' || k, 'sentences_' || k);
            END LOOP;
        END $$;
        CREATE INDEX sentences_scope ON {s}.sentences (scope_key, session_id, produced_at);
        CREATE INDEX sentences_tsv ON {s}.sentences USING gin (tsv);
        CREATE INDEX sentences_entity_keys ON {s}.sentences USING gin (entity_keys);
        ALTER TABLE {s}.sentences ADD FOREIGN KEY (scope_key, episode_uid)
            REFERENCES {s}.episodes (scope_key, uid) ON DELETE CASCADE;
        ANALYZE {s}.sentences;
        """


def _store_items_migration(s: str) -> str:
    """6: LangGraph's store face keeps its items in tables of their own (memroute.memory.items),
    under a tenant, with namespaces of any depth. The items MemrouteStore wrote before (episodes
    in the scope their namespace named, the value in their metadata) move to the tenant of a
    store built without one, under the same namespaces and keys: their episodes and sentence
    vectors move with them (nothing is embedded again)."""
    t = DEFAULT_TENANT
    return f"""
        CREATE TABLE {s}.store_items (
            scope_key   text        NOT NULL,
            org_id      text        NOT NULL,
            project_id  text        NOT NULL,
            user_id     text,
            agent_id    text,
            prefix      text        NOT NULL,
            key         text        NOT NULL,
            value       jsonb       NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now(),
            updated_at  timestamptz NOT NULL DEFAULT now(),
            expires_at  timestamptz,
            ttl_minutes double precision,
            episode_uid text,
            PRIMARY KEY (scope_key, prefix, key)
        );
        CREATE INDEX store_items_prefix ON {s}.store_items (scope_key, prefix text_pattern_ops);
        CREATE INDEX store_items_updated ON {s}.store_items (scope_key, updated_at);
        CREATE INDEX store_items_episode ON {s}.store_items (scope_key, episode_uid)
            WHERE episode_uid IS NOT NULL;
        CREATE INDEX store_items_expires ON {s}.store_items (scope_key, expires_at)
            WHERE expires_at IS NOT NULL;
        CREATE TABLE {s}.store_vectors (
            scope_key   text   NOT NULL,
            prefix      text   NOT NULL,
            key         text   NOT NULL,
            field_name  text   NOT NULL,
            embedding   vector NOT NULL,
            PRIMARY KEY (scope_key, prefix, key, field_name),
            FOREIGN KEY (scope_key, prefix, key)
                REFERENCES {s}.store_items (scope_key, prefix, key) ON DELETE CASCADE
        );
        CREATE TEMP TABLE _memroute_moved ON COMMIT DROP AS
            SELECT DISTINCT ON (prefix, uid)
                   scope_key AS old_key, uid AS old_uid, prefix, uid AS key,
                   (SELECT jsonb_object_agg('l' || (n - 1), label)
                    FROM unnest(string_to_array(prefix, '.')) WITH ORDINALITY AS l(label, n)
                   ) AS labels,
                   'item:' || left(encode(sha256(convert_to(
                       length(prefix) || ':' || prefix || uid, 'UTF8')), 'hex'), 40) AS new_uid,
                   metadata ? 'store_unindexed' AS unindexed, produced_at, content, metadata,
                   created_at
            FROM (SELECT *, concat_ws('.', org_id, project_id, user_id, agent_id) AS prefix
                  FROM {s}.episodes
                  WHERE producer = 'langgraph-store' AND session_id = 'store'
                    AND metadata ? 'store_value') old
            ORDER BY prefix, uid, produced_at DESC;
        INSERT INTO {s}.store_items (scope_key, org_id, project_id, prefix, key, value,
                                     created_at, updated_at, expires_at, ttl_minutes,
                                     episode_uid)
            SELECT '{t.key}', '{t.org_id}', '{t.project_id}', prefix, key,
                   metadata -> 'store_value', created_at, greatest(created_at, produced_at),
                   to_timestamp((metadata ->> 'store_expires_at')::float8),
                   (metadata ->> 'store_ttl_minutes')::float8,
                   CASE WHEN unindexed THEN NULL ELSE new_uid END
            FROM _memroute_moved;
        INSERT INTO {s}.episodes (scope_key, org_id, project_id, uid, session_id, producer,
                                  produced_at, content, metadata, created_at)
            SELECT '{t.key}', '{t.org_id}', '{t.project_id}', new_uid, 'store',
                   'langgraph-store', produced_at, content,
                   metadata - 'store_ttl_minutes' || jsonb_build_object('store_ns', labels),
                   created_at
            FROM _memroute_moved WHERE NOT unindexed;
        UPDATE {s}.sentences x
            SET scope_key = '{t.key}', episode_uid = m.new_uid,
                metadata = x.metadata - 'store_ttl_minutes'
                           || jsonb_build_object('store_ns', m.labels)
            FROM _memroute_moved m
            WHERE x.scope_key = m.old_key AND x.episode_uid = m.old_uid AND NOT m.unindexed;
        DELETE FROM {s}.episodes e USING _memroute_moved m
            WHERE e.scope_key = m.old_key AND e.uid = m.old_uid;
        """


async def migrate(conn: AsyncConnection, schema: str, embedder_name: str, dim: int, *,
                  buckets: int) -> int:
    """Create or upgrade the schema; record and check the embedder. ``buckets``: how many
    buckets the sentences table is partitioned into, when migration 8 makes it so (a store
    keeps its number). Returns the version."""
    check_identifier(schema)
    s = schema
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.schema_version ("
            "version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.store_info (key text PRIMARY KEY, value text NOT NULL)"
        )
        row = await (await conn.execute(
            f"SELECT key, value FROM {s}.store_info WHERE key IN ('embedder', 'dim')"
        )).fetchall()
        info = dict(row)
        if info:
            if info.get("embedder") != embedder_name or int(info.get("dim", 0)) != dim:
                raise EmbedderMismatchError(
                    f"schema {s!r} was built with embedder {info.get('embedder')} "
                    f"({info.get('dim')}-d), not {embedder_name} ({dim}-d); use that embedder, "
                    "another schema (MEMROUTE_DB_SCHEMA), or re-ingest"
                )
        else:
            await conn.execute(
                f"INSERT INTO {s}.store_info (key, value) VALUES ('embedder', %s), ('dim', %s)",
                (embedder_name, str(dim)),
            )
        cur = await conn.execute(f"SELECT coalesce(max(version), 0) FROM {s}.schema_version")
        current = (await cur.fetchone())[0]
        migrations = _migrations(s, dim, buckets)
        for version in range(current + 1, len(migrations) + 1):
            log.info("schema.migrate", schema=s, version=version)
            await conn.execute(migrations[version - 1])
            await conn.execute(f"INSERT INTO {s}.schema_version (version) VALUES (%s)", (version,))
        return len(migrations)
