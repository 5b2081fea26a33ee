package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// Attacks on tenancy from the data (issue #19, findings 2 and 5): a
// version's tenant comes from its run or its parents, never a default, and
// a step's key is the system's.

// TestAttackTenancyCompressOutput runs acme's workflow with a compress
// step through the restricted worker. The compress version has parents
// but no base; it and every version after it must belong to acme: acme
// reads the run's output, and a read token of the default tenant gets 404.
func TestAttackTenancyCompressOutput(t *testing.T) {
	t.Parallel()
	s := newSecured(t)
	acme := s.mint("submit", "acme")
	dflt := s.mint("read", "default")
	wf := s.writeFile("compress.yaml", `version: 1
agents:
  talker:
    model: scripted
    script: ["acme's long answer", "acme's long answer"]
  squash:
    model: scripted
    script: ["acme's confidential summary", "acme's confidential summary", "acme's confidential summary"]
steps:
  - agent: talker
  - compress: squash
  - agent: talker
`)
	out := s.as(acme, "run", wf, "--message", "acme's question", "-o", "json")
	var r runs.Run
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("run output %q: %v", out, err)
	}
	r = s.waitRun(acme, r.ID)
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("acme's compress run: %s (%s), output %v", r.Status, r.Error, r.Output)
	}
	got, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + acme}, "", "session", "show", r.Output.String(), "--server", s.server)
	if code != 0 || !strings.Contains(got, "confidential summary") {
		t.Errorf("acme reading its own compressed output: exit %d: %s %s", code, got, errOut)
	}
	got, errOut, code = s.rathctl([]string{"RATH_TOKEN=" + dflt}, "", "session", "show", r.Output.String(), "--server", s.server)
	if code == 0 || !strings.Contains(errOut, "404") || strings.Contains(got+errOut, "confidential") {
		t.Errorf("default's read token reading acme's compressed output: exit %d: %s %s", code, got, errOut)
	}
	// The truth: every version of the run is acme's.
	db := ownerDB(t, s)
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM versions WHERE run = $1 AND tenant <> 'acme'`, r.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d versions of acme's run belong to another tenant", n)
	}
}

// TestAttackTenancyStepKeySquat squats the key of acme's pending step, as
// umbrella (a version of its own) and as acme (a forged output on the
// run's input), through POST /v1/versions. Both are refused with the field
// named; the worker then stores and adopts the run's real output. rathctl
// check is clean, and flags a step output the owner forges in the database
// that does not descend from the step's input.
func TestAttackTenancyStepKeySquat(t *testing.T) {
	t.Parallel()
	s := newSecured(t)
	acme := s.mint("submit", "acme")
	umbrella := s.mint("submit", "umbrella")
	agent := s.writeFile("agent.yaml", "name: echo\nmodel: scripted\nscript:\n  - content: the real answer\n")

	// The step stays pending while no worker runs.
	s.worker.stop(t)
	out := s.as(acme, "run", "--agent", agent, "--message", "acme's question", "-o", "json")
	var r runs.Run
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("run output %q: %v", out, err)
	}
	if len(r.Steps) != 1 {
		t.Fatalf("run %+v: want one step", r)
	}
	key := r.Steps[0].ID

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Umbrella: a session of its own, then a version under acme's step key.
	uc, err := client.New(s.server, umbrella)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := session.New(ctx, uc.Graph(), session.User("umbrella's bait"))
	if err != nil {
		t.Fatalf("umbrella's own session: %v", err)
	}
	_, err = mine.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("forged by umbrella")}, Key: key})
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "key") {
		t.Errorf("umbrella squatting acme's step key %s: %v; want 400 naming key", key, err)
	}
	// Acme itself: a forged output on the run's input.
	ac, err := client.New(s.server, acme)
	if err != nil {
		t.Fatal(err)
	}
	in, err := session.Open(ctx, ac.Graph(), r.Input)
	if err != nil {
		t.Fatalf("acme opening its input: %v", err)
	}
	_, err = in.Extend(ctx, session.Extension{Op: session.OpStep, Chunks: []session.Chunk{session.Assistant("forged by acme")}, Key: key})
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "key") {
		t.Errorf("acme squatting its own step key %s: %v; want 400 naming key", key, err)
	}

	// The worker runs the step: the real output is stored and adopted.
	s.worker.start(t)
	r = s.waitRun(acme, r.ID)
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("acme's run: %s (%s)", r.Status, r.Error)
	}
	got, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + acme}, "", "session", "show", r.Output.String(), "--server", s.server)
	if code != 0 || !strings.Contains(got, "the real answer") || strings.Contains(got, "forged") {
		t.Errorf("acme's run output: exit %d: %s %s", code, got, errOut)
	}
	if got, errOut, code := s.rathctl(nil, "", "check", "--store", s.storeURL); code != 0 {
		t.Errorf("rathctl check after the refused squats: exit %d: %s %s", code, got, errOut)
	}

	// The owner forges a committed step whose output does not descend
	// from its input; check flags it.
	g, err := pgstore.Open(ctx, s.storeURL, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	forged, err := session.New(ctx, g, session.Assistant("forged by the owner"))
	if err != nil {
		t.Fatalf("owner's forged version: %v", err)
	}
	db := ownerDB(t, s)
	forgedRun := runs.NewRunID()
	if _, err := db.ExecContext(ctx, `INSERT INTO runs (id, status, queue, target, input_id, output_id, created_at, updated_at)
		SELECT $1, 'succeeded', queue, target, input_id, $2, created_at, updated_at FROM runs WHERE id = $3`,
		forgedRun, forged.ID().String(), r.ID); err != nil {
		t.Fatalf("forge run: %v", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO steps (id, run_id, ordinal, status, input_id, output_id, created_at, updated_at)
		SELECT $1, $2, 0, 'committed', input_id, $3, created_at, updated_at FROM steps WHERE id = $4`,
		runs.StepID(forgedRun, 0), forgedRun, forged.ID().String(), key); err != nil {
		t.Fatalf("forge step: %v", err)
	}
	got, _, code = s.rathctl(nil, "", "check", "--store", s.storeURL)
	if code == 0 || !strings.Contains(got, "does not descend from its input") || !strings.Contains(got, runs.StepID(forgedRun, 0)) {
		t.Errorf("rathctl check after the owner forged step %s: exit %d: %s", runs.StepID(forgedRun, 0), code, got)
	}
}

// ownerDB opens the deployment's database as its owner (the truth).
func ownerDB(t *testing.T, s *secured) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", s.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
