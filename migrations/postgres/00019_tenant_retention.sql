-- Retention and redaction per tenant (issue #20: gc, pin, redact and check
-- through the coordinator). A tenant's admin token runs them over the
-- coordinator's tenant pools (internal/auth TenantPools, rath.tenant set,
-- role rath_coordinator), so row-level security must confine them:
--
--   - pins: a pin belongs to its version's tenant. A tenant connection
--     sees, writes and deletes only pins of versions it can see (a pin of
--     another tenant's version is refused by the policy's check).
--   - redactions: a redaction records its tenant (the connection's, else
--     its version's, else 'default'): it outlives a gc of its version, so
--     the tenant is a column, not a join. Existing rows take their version's.
--   - rath_gc and rath_redact (SECURITY DEFINER, 00012 and 00014) run as
--     their NOLOGIN roles, which row-level security holds: on a tenant
--     connection they see, keep, delete and redact only that tenant's rows.
--     rath_coordinator (what tenant pools act as) may now execute them.
--
-- System connections (rath.tenant unset: rathctl with --store, migrations)
-- still see every row, as for the other tables (00011).

-- +goose Up
ALTER TABLE pins ENABLE ROW LEVEL SECURITY;
ALTER TABLE pins FORCE ROW LEVEL SECURITY;
CREATE POLICY pins_tenant ON pins
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM versions v WHERE v.id = pins.version_id))
    WITH CHECK (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM versions v WHERE v.id = pins.version_id));

ALTER TABLE redactions ADD COLUMN tenant text;

-- +goose StatementBegin
CREATE FUNCTION rath_redaction_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.tenant := coalesce(rath_tenant(),
                           (SELECT v.tenant FROM versions v WHERE v.id = NEW.version_id),
                           'default');
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER redactions_tenant BEFORE INSERT ON redactions FOR EACH ROW EXECUTE FUNCTION rath_redaction_tenant();

-- Existing redactions take their version's tenant (past the append-only
-- trigger, which the migrating owner may set aside for this statement).
ALTER TABLE redactions DISABLE TRIGGER redactions_append_only;
UPDATE redactions r SET tenant = coalesce((SELECT v.tenant FROM versions v WHERE v.id = r.version_id), 'default')
WHERE r.tenant IS NULL;
ALTER TABLE redactions ENABLE TRIGGER redactions_append_only;

ALTER TABLE redactions ENABLE ROW LEVEL SECURITY;
ALTER TABLE redactions FORCE ROW LEVEL SECURITY;
CREATE POLICY redactions_tenant ON redactions
    USING (rath_tenant() IS NULL OR tenant = rath_tenant())
    WITH CHECK (rath_tenant() IS NULL OR tenant = rath_tenant());

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_coordinator') THEN
        GRANT EXECUTE ON FUNCTION rath_gc(timestamptz, boolean) TO rath_coordinator;
        GRANT EXECUTE ON FUNCTION rath_redact(uuid, integer, text, text) TO rath_coordinator;
    END IF;
EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
    RAISE NOTICE 'rath: cannot let rath_coordinator run rath_gc and rath_redact (%): tenants cannot gc or redact through the API', SQLERRM;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_coordinator') THEN
        REVOKE EXECUTE ON FUNCTION rath_gc(timestamptz, boolean) FROM rath_coordinator;
        REVOKE EXECUTE ON FUNCTION rath_redact(uuid, integer, text, text) FROM rath_coordinator;
    END IF;
EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN NULL;
END;
$$;
-- +goose StatementEnd
DROP POLICY redactions_tenant ON redactions;
ALTER TABLE redactions NO FORCE ROW LEVEL SECURITY;
ALTER TABLE redactions DISABLE ROW LEVEL SECURITY;
DROP TRIGGER redactions_tenant ON redactions;
DROP FUNCTION rath_redaction_tenant();
ALTER TABLE redactions DROP COLUMN tenant;
DROP POLICY pins_tenant ON pins;
ALTER TABLE pins NO FORCE ROW LEVEL SECURITY;
ALTER TABLE pins DISABLE ROW LEVEL SECURITY;
