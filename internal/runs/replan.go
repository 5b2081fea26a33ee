package runs

import (
	"fmt"
	"sync/atomic"
)

// Plan generations. Postgres plans a table it has no statistics for as a
// table of ten pages, and an array parameter as ten elements: for such a
// table one scan of runs costs it less than ten lookups by key, so on a
// new store the grouped start's and the grouped commit's generic plans
// scan runs whole (TestGroupedStartsPlannedAnewAsTheStoreGrows). A
// connection keeps a prepared statement's generic plan until the
// statistics of a table it reads change, at autovacuum's first visit: up
// to a minute on a store that grows by thousands of runs a second
// meanwhile (issue 25, nineteenth round).
//
// So the grouped statements carry a generation in a leading comment, which
// moves on as the store's own grouped starts and fast-path commits pass
// replanAfter's counts: a connection prepares the statement of the new
// generation anew, and Postgres plans it on the tables as they have grown
// (by their current size when there are no statistics yet). Each
// connection prepares each statement at most len(replanAfter)+1 times; the
// earlier generations age out of its statement cache. pg_stat_statements
// counts the generations as one statement (it ignores comments).
//
// This covers the grouped statements only. On a worker's connection as
// rath_worker, the row-level security checks of the one-row statements
// read runs too, and their young plans can scan it as well: on a fresh
// cluster, about three in four of the plans over 1 ms that scanned runs
// were not of a grouped statement (docs/BENCHMARKS.md).

// replanAfter are the counts of grouped starts and fast-path commits a
// Store has made at which its grouped statements go to the next
// generation.
var replanAfter = [...]int64{200, 2_000, 20_000}

// generations is a statement's text in each generation.
type generations [len(replanAfter) + 1]string

// generationsOf returns q in each generation.
func generationsOf(q string) generations {
	var g generations
	for i := range g {
		g[i] = generationMark(i) + " " + q
	}
	return g
}

// generationMark is the comment that leads a statement of generation i.
func generationMark(i int) string { return fmt.Sprintf("/* rath plan generation %d */", i) }

// growth counts a Store's grouped starts and fast-path commits.
type growth struct{ n atomic.Int64 }

// next counts one grouped start or commit and returns the generation of
// q to send for it.
func (g *growth) next(q *generations) string {
	n := g.n.Add(1)
	i := 0
	for i < len(replanAfter) && n > replanAfter[i] {
		i++
	}
	return q[i]
}

// The grouped statements, by generation.
var (
	startStepsGen      = generationsOf(startStepsSQL)
	startStepsEpochGen = generationsOf(startStepsEpochSQL)
	startStepsInputGen = generationsOf(startStepsInputSQL)
	commitStepsGen     = generationsOf(commitStepsSQL)
)
