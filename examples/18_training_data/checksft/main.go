// Command checksft decodes an SFT file exported by `rathctl export
// trajectories` with pkg/trainset's strict reader (the OpenAI fine-tuning
// chat format's rules: roles, tool-call ids matching tool results, an
// assistant reply last) and prints each record's version id, one a line,
// so a script can hand them to `rathctl verify`.
//
//	go run ./examples/18_training_data/checksft sft.jsonl
package main

import (
	"fmt"
	"os"

	"github.com/rath-run/rath/pkg/trainset"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: checksft FILE.jsonl")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	n, msgs := 0, 0
	err = trainset.ReadOpenAI(f, func(r trainset.OpenAIRecord) error {
		n++
		msgs += len(r.Messages)
		fmt.Println(r.Provenance.VersionID)
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "checksft:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "checksft: %d records, %d messages, all valid\n", n, msgs)
}
