-- Tenants for the memory plane (pkg/memory, docs/security.md), on top of
-- 00011's: a memory namespace belongs to one tenant, recorded in
-- memory_namespaces, and every memory_* row follows its namespace's tenant
-- the way chunks follow their version. Row-level security, FORCEd so that
-- the tables' owner is bound too, keys on the same session setting
-- (rath.tenant, rath_tenant()):
--
--   - a connection that sets it (the coordinator's tenant pools) sees and
--     writes only the namespaces its tenant owns. Its first write to a
--     namespace nobody owns claims it. A namespace another tenant owns
--     reads as empty, and writing to it fails with 42501;
--   - a connection that does not set it is system work (workers, rathctl
--     with store access) and sees every row. A system write claims a new
--     namespace for the tenant of the version that writes the item (a
--     worker's step output belongs to its run's tenant), else 'default'.
--
-- Existing namespaces belong to 'default'. The keys of the memory tables do
-- not change (rolling upgrades: release N keeps its ON CONFLICT targets), so
-- two tenants never share a namespace name: the first to write it owns it.

-- +goose Up
CREATE TABLE memory_namespaces (
    namespace  text        PRIMARY KEY,
    tenant     text        NOT NULL DEFAULT 'default',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_namespaces_tenant_idx ON memory_namespaces (tenant, namespace);

INSERT INTO memory_namespaces (namespace, tenant)
SELECT namespace, 'default' FROM memory_items
UNION SELECT namespace, 'default' FROM memory_postings
UNION SELECT namespace, 'default' FROM memory_stats
UNION SELECT namespace, 'default' FROM memory_terms
UNION SELECT namespace, 'default' FROM memory_log
UNION SELECT namespace, 'default' FROM memory_vectors;

-- rath_memory_claim: the BEFORE INSERT trigger of every memory_* table. A
-- tenant connection claims an unowned namespace for its tenant; a system
-- connection claims it for the writing version's tenant (TG_ARGV[0] names
-- the row's version column, when the table has one) or 'default'. A system
-- write with no version to go by leaves the claim to the item's insert.
-- +goose StatementBegin
CREATE FUNCTION rath_memory_claim() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    owner text;
    version text;
BEGIN
    IF EXISTS (SELECT 1 FROM memory_namespaces n WHERE n.namespace = NEW.namespace) THEN
        RETURN NEW;
    END IF;
    owner := rath_tenant();
    IF owner IS NULL THEN
        IF TG_NARGS = 0 THEN
            RETURN NEW;
        END IF;
        version := to_jsonb(NEW) ->> TG_ARGV[0];
        IF version ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
            SELECT v.tenant INTO owner FROM versions v WHERE v.id = version::uuid;
        END IF;
        owner := coalesce(owner, 'default');
    END IF;
    INSERT INTO memory_namespaces (namespace, tenant) VALUES (NEW.namespace, owner)
        ON CONFLICT (namespace) DO NOTHING;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER memory_items_claim BEFORE INSERT ON memory_items FOR EACH ROW EXECUTE FUNCTION rath_memory_claim('version_id');
CREATE TRIGGER memory_log_claim BEFORE INSERT ON memory_log FOR EACH ROW EXECUTE FUNCTION rath_memory_claim('version_id');
CREATE TRIGGER memory_postings_claim BEFORE INSERT ON memory_postings FOR EACH ROW EXECUTE FUNCTION rath_memory_claim();
CREATE TRIGGER memory_stats_claim BEFORE INSERT ON memory_stats FOR EACH ROW EXECUTE FUNCTION rath_memory_claim();
CREATE TRIGGER memory_terms_claim BEFORE INSERT ON memory_terms FOR EACH ROW EXECUTE FUNCTION rath_memory_claim();
CREATE TRIGGER memory_vectors_claim BEFORE INSERT ON memory_vectors FOR EACH ROW EXECUTE FUNCTION rath_memory_claim();

ALTER TABLE memory_namespaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_namespaces FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_namespaces_tenant ON memory_namespaces
    USING (rath_tenant() IS NULL OR tenant = rath_tenant())
    WITH CHECK (rath_tenant() IS NULL OR tenant = rath_tenant());

-- rath_memory_owned: whether the connection's tenant owns namespace ns (the
-- query reads memory_namespaces under its row-level security). VOLATILE on
-- purpose: the checks on a new row (WITH CHECK, and the USING an INSERT …
-- ON CONFLICT DO UPDATE applies to it) must see the claim the row's own
-- BEFORE INSERT trigger just made, which the statement's snapshot does not.
-- The USING clauses try the plain subquery first, so reading the rows of an
-- owned namespace never calls it.
-- +goose StatementBegin
CREATE FUNCTION rath_memory_owned(ns text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM memory_namespaces n WHERE n.namespace = ns);
END;
$$;
-- +goose StatementEnd

-- The memory rows follow their namespace: the subquery reads
-- memory_namespaces, itself under row-level security.
ALTER TABLE memory_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_items FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_items_tenant ON memory_items
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM memory_namespaces n WHERE n.namespace = memory_items.namespace)
           OR rath_memory_owned(memory_items.namespace))
    WITH CHECK (rath_tenant() IS NULL OR rath_memory_owned(memory_items.namespace));

ALTER TABLE memory_postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_postings FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_postings_tenant ON memory_postings
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM memory_namespaces n WHERE n.namespace = memory_postings.namespace)
           OR rath_memory_owned(memory_postings.namespace))
    WITH CHECK (rath_tenant() IS NULL OR rath_memory_owned(memory_postings.namespace));

ALTER TABLE memory_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_stats FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_stats_tenant ON memory_stats
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM memory_namespaces n WHERE n.namespace = memory_stats.namespace)
           OR rath_memory_owned(memory_stats.namespace))
    WITH CHECK (rath_tenant() IS NULL OR rath_memory_owned(memory_stats.namespace));

ALTER TABLE memory_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_terms FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_terms_tenant ON memory_terms
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM memory_namespaces n WHERE n.namespace = memory_terms.namespace)
           OR rath_memory_owned(memory_terms.namespace))
    WITH CHECK (rath_tenant() IS NULL OR rath_memory_owned(memory_terms.namespace));

ALTER TABLE memory_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_log FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_log_tenant ON memory_log
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM memory_namespaces n WHERE n.namespace = memory_log.namespace)
           OR rath_memory_owned(memory_log.namespace))
    WITH CHECK (rath_tenant() IS NULL OR rath_memory_owned(memory_log.namespace));

ALTER TABLE memory_vectors ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_vectors FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_vectors_tenant ON memory_vectors
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM memory_namespaces n WHERE n.namespace = memory_vectors.namespace)
           OR rath_memory_owned(memory_vectors.namespace))
    WITH CHECK (rath_tenant() IS NULL OR rath_memory_owned(memory_vectors.namespace));

-- Grants: rath_coordinator gets the new table through 00011's default
-- privileges when the same user migrates, and explicitly here; rath_worker
-- claims namespaces through the triggers (its memory DML).
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_coordinator') THEN
        GRANT SELECT, INSERT ON memory_namespaces TO rath_coordinator;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_worker') THEN
        GRANT SELECT, INSERT ON memory_namespaces TO rath_worker;
    END IF;
END;
$$;
-- +goose StatementEnd

-- rath_gc (00012) reads memory_items to keep the versions memories point
-- at; memory_items' policy now reads memory_namespaces, and Postgres checks
-- a policy's tables' privileges even where rath_tenant() IS NULL decides.
-- +goose StatementBegin
DO $$
BEGIN
    GRANT SELECT ON memory_namespaces TO rath_gc;
EXCEPTION WHEN undefined_object OR insufficient_privilege THEN
    RAISE NOTICE 'rath: cannot grant memory_namespaces to rath_gc (%)', SQLERRM;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP POLICY memory_vectors_tenant ON memory_vectors;
ALTER TABLE memory_vectors NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_vectors DISABLE ROW LEVEL SECURITY;
DROP POLICY memory_log_tenant ON memory_log;
ALTER TABLE memory_log NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_log DISABLE ROW LEVEL SECURITY;
DROP POLICY memory_terms_tenant ON memory_terms;
ALTER TABLE memory_terms NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_terms DISABLE ROW LEVEL SECURITY;
DROP POLICY memory_stats_tenant ON memory_stats;
ALTER TABLE memory_stats NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_stats DISABLE ROW LEVEL SECURITY;
DROP POLICY memory_postings_tenant ON memory_postings;
ALTER TABLE memory_postings NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_postings DISABLE ROW LEVEL SECURITY;
DROP POLICY memory_items_tenant ON memory_items;
ALTER TABLE memory_items NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_items DISABLE ROW LEVEL SECURITY;
DROP POLICY memory_namespaces_tenant ON memory_namespaces;
DROP TRIGGER memory_vectors_claim ON memory_vectors;
DROP TRIGGER memory_terms_claim ON memory_terms;
DROP TRIGGER memory_stats_claim ON memory_stats;
DROP TRIGGER memory_postings_claim ON memory_postings;
DROP TRIGGER memory_log_claim ON memory_log;
DROP TRIGGER memory_items_claim ON memory_items;
DROP FUNCTION rath_memory_owned(text);
DROP FUNCTION rath_memory_claim();
DROP TABLE memory_namespaces;
