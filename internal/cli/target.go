package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// Where a command works is chosen in one place, chooseTarget, for every
// command (docs/cli.md, "Choosing the target"):
//
//   - a store directly, only when --store or RATH_STORE names one;
//   - otherwise a coordinator: --server, else RATH_SERVER, else the server
//     `rathctl login` saved, else defaultServer; the token is --token,
//     else RATH_TOKEN, else the token login saved for that same server.
//
// --store with --server is a usage error, and so are RATH_STORE and
// RATH_SERVER both set with neither flag: rathctl never guesses which one
// was meant.

// where is a chosen target: storeURL, or server (with token).
type where struct {
	storeURL string
	server   string
	token    string
}

// chooseTarget applies the rules above to a command's --store, --server
// and --token flags ("" when not given or not accepted).
func chooseTarget(storeFlag, serverFlag, tokenFlag string) (where, error) {
	if storeFlag != "" && serverFlag != "" {
		return where{}, &exitError{code: 2, err: errors.New("give --store or --server, not both")}
	}
	if storeFlag != "" {
		return where{storeURL: storeFlag}, nil
	}
	if serverFlag == "" {
		envStore, envServer := os.Getenv("RATH_STORE"), os.Getenv("RATH_SERVER")
		if envStore != "" && envServer != "" {
			return where{}, &exitError{code: 2, err: errors.New("RATH_STORE and RATH_SERVER are both set: choose with --store URL or --server URL, or unset one")}
		}
		if envStore != "" {
			return where{storeURL: envStore}, nil
		}
	}
	return serverTarget(serverFlag, tokenFlag), nil
}

// serverTarget is the coordinator part of the rules, for commands that
// only work through a coordinator.
func serverTarget(serverFlag, tokenFlag string) where {
	server := apiServer(serverFlag)
	return where{server: server, token: apiToken(tokenFlag, server)}
}

// storeURLFrom is the store --store or RATH_STORE names, or a usage error
// for a command that has only a store form.
func storeURLFrom(storeFlag string) (string, error) {
	u := cmp.Or(storeFlag, os.Getenv("RATH_STORE"))
	if u == "" {
		return "", &exitError{code: 2, err: errors.New("this command reads a store directly: name it with --store URL or RATH_STORE (postgres://… or sqlite:PATH)")}
	}
	return u, nil
}

// openStoreURL opens (and migrates) the store u names. Only create (rathctl
// migrate) may make a new SQLite file; otherwise a missing one is an error
// naming its path.
func openStoreURL(ctx context.Context, u string, create bool) (store.Store, error) {
	return storeurl.Open(ctx, u, storeurl.Options{Migrate: true, Create: create})
}

// checkOutput is the root's check of -o/--output for every command that
// has one: text or json, else a usage error.
func checkOutput(c *cobra.Command) error {
	fl := c.Flags().Lookup("output")
	if fl == nil {
		return nil
	}
	if v := fl.Value.String(); v != "text" && v != "json" {
		return &exitError{code: 2, err: fmt.Errorf("--output must be text or json, not %q", v)}
	}
	return nil
}

// noCoordinator rewrites an error that failed to connect to a coordinator
// into one that says so and what to do, naming the coordinator's URL.
func noCoordinator(err error) error {
	var op *net.OpError
	var ue *url.Error
	if !errors.As(err, &op) || op.Op != "dial" || !errors.As(err, &ue) {
		return err
	}
	base := ue.URL
	if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
		base = u.Scheme + "://" + u.Host
	}
	return fmt.Errorf("no coordinator at %s (start one with \"rathctl dev\", name one with --server or RATH_SERVER, or use a store with --store): %w", base, op)
}
