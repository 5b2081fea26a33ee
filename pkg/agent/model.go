package agent

import (
	"fmt"

	"github.com/rath-run/rath/pkg/llm"
)

// validateNames checks the spec's model and provider names
// ([llm.ValidateModel], [llm.ValidateProvider]): a spec's author is a
// tenant, and these names pick what the worker resolves, so they are
// bounded names, never paths ("scripted:<name>" names a file only inside
// the worker operator's RATH_SCRIPT_DIR).
func (s *Spec) validateNames() error {
	if err := llm.ValidateModel(s.Model); err != nil {
		return fmt.Errorf("%w: model: %w", ErrInvalidSpec, err)
	}
	if s.Provider != "" {
		if err := llm.ValidateProvider(s.Provider); err != nil {
			return fmt.Errorf("%w: provider: %w", ErrInvalidSpec, err)
		}
	}
	return nil
}
