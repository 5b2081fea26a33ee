// Command checksft decodes what example 18 exported: an SFT file from
// `rathctl export trajectories`, with pkg/trainset's strict reader (the
// OpenAI fine-tuning chat format's rules: roles, tool-call ids matching
// tool results, an assistant reply last), and a DPO file from `rathctl
// export pairs`, strictly (no unknown field; a prompt, a chosen and a
// rejected side, each side's provenance and the source that ranked it).
// It prints every version the records name, one a line, so a script can
// hand them to `rathctl verify`.
//
//	go run ./examples/18_training_data/checksft sft.jsonl [pairs.jsonl]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rath-run/rath/pkg/trainset"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: checksft SFT.jsonl [PAIRS.jsonl]")
		os.Exit(2)
	}
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "checksft:", err)
		os.Exit(1)
	}
}

func run(files []string, out, log io.Writer) error {
	f, err := os.Open(files[0])
	if err != nil {
		return err
	}
	defer f.Close()
	n, msgs := 0, 0
	err = trainset.ReadOpenAI(f, func(r trainset.OpenAIRecord) error {
		n++
		msgs += len(r.Messages)
		fmt.Fprintln(out, r.Provenance.VersionID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", files[0], err)
	}
	fmt.Fprintf(log, "%s: %d SFT records, %d messages, all valid\n", files[0], n, msgs)
	if len(files) == 1 {
		return nil
	}
	return checkPairs(files[1], out, log)
}

func checkPairs(path string, out, log io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	sources := map[trainset.PairSource]int{}
	n := 0
	for sc.Scan() {
		n++
		var p trainset.Pair
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		pv := p.Provenance
		switch {
		case len(p.Prompt) == 0 || len(p.Chosen) == 0 || len(p.Rejected) == 0:
			return fmt.Errorf("%s:%d: a pair needs a prompt, a chosen and a rejected side", path, n)
		case p.Chosen[len(p.Chosen)-1].Role != "assistant" || p.Rejected[len(p.Rejected)-1].Role != "assistant":
			return fmt.Errorf("%s:%d: each side must end with an assistant reply", path, n)
		case pv.Source == "" || pv.Chosen.VersionID == pv.Rejected.VersionID:
			return fmt.Errorf("%s:%d: provenance must name its source and two versions", path, n)
		case pv.Source == trainset.FromScores && (pv.ChosenLabel == nil || pv.RejectedLabel == nil ||
			*pv.ChosenLabel.Score <= *pv.RejectedLabel.Score):
			return fmt.Errorf("%s:%d: a scores pair must choose the higher score", path, n)
		}
		sources[pv.Source]++
		fmt.Fprintln(out, pv.PromptVersion)
		fmt.Fprintln(out, pv.Chosen.VersionID)
		fmt.Fprintln(out, pv.Rejected.VersionID)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if n == 0 {
		return errors.New(path + ": no pairs")
	}
	fmt.Fprintf(log, "%s: %d DPO pairs, all valid (by source: %v)\n", path, n, sources)
	return nil
}
