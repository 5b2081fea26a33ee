// Package natsauth is Rath's NATS authorisation: the users a deployment
// runs with, the subjects each role may publish and subscribe to, and the
// client options that present a role's credentials.
//
// # Roles
//
// [RoleCoordinator] runs the API and the reconciler: it declares the
// streams, publishes jobs and reads every run's events, so it may use every
// subject. [RoleWorker] pulls step jobs, acknowledges them, publishes run
// events and reads and writes workspace snapshots; it may not publish jobs,
// read events, subscribe to the job or event subjects directly, nor call the
// JetStream API's administrative subjects (delete or purge a stream, update
// its configuration, delete a job consumer). Its replies arrive on its own
// inbox prefix ([WorkerInboxPrefix]), so it cannot read the replies meant for
// the coordinator (which carry every tenant's events).
//
// rathctl does not talk to NATS (its `dev` command runs an embedded server
// in-process), so there is no client role.
//
// # Credentials
//
// Processes read RATH_NATS_USER and RATH_NATS_PASSWORD (or
// RATH_NATS_PASSWORD_FILE), or RATH_NATS_CREDS (a NATS credentials file for
// operator/JWT deployments), see [ClientOptions]. Passwords never appear in
// logs or errors.
package natsauth

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
)

// Role is what a NATS user is for.
type Role string

// The roles.
const (
	RoleCoordinator Role = "coordinator"
	RoleWorker      Role = "worker"
)

// WorkerInboxPrefix is the inbox prefix of worker connections: the only
// reply subjects a worker may subscribe to.
const WorkerInboxPrefix = "_INBOX_worker"

// Subjects of the JetStream API and of the streams the worker uses.
var (
	objStream = "OBJ_" + bus.WorkspacesBucket

	workerPublish = []string{
		// Run events, to every run (workers serve every tenant's runs).
		"rath.events.>",
		// Look the streams up (bus.Config.Bind) and the account.
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO." + bus.JobsStream,
		"$JS.API.STREAM.INFO." + bus.EventsStream,
		"$JS.API.STREAM.INFO." + objStream,
		// The queue's durable pull consumer: create or bind, fetch, ack.
		"$JS.API.CONSUMER.CREATE." + bus.JobsStream + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + bus.JobsStream + ".>",
		"$JS.API.CONSUMER.INFO." + bus.JobsStream + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + bus.JobsStream + ".>",
		"$JS.ACK." + bus.JobsStream + ".>",
		// Workspace snapshots: object chunks and metadata, and the
		// ephemeral consumers and direct gets that read them back.
		"$O." + bus.WorkspacesBucket + ".>",
		"$JS.API.CONSUMER.CREATE." + objStream,
		"$JS.API.CONSUMER.CREATE." + objStream + ".>",
		"$JS.API.CONSUMER.DELETE." + objStream + ".>",
		"$JS.API.CONSUMER.INFO." + objStream + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + objStream + ".>",
		"$JS.API.STREAM.MSG.GET." + objStream,
		"$JS.API.DIRECT.GET." + objStream,
		"$JS.API.DIRECT.GET." + objStream + ".>",
		"$JS.FC." + objStream + ".>",
		"$JS.ACK." + objStream + ".>",
	}
	workerPublishDeny = []string{
		"rath.jobs.>",
		"$JS.API.STREAM.CREATE.>",
		"$JS.API.STREAM.UPDATE.>",
		"$JS.API.STREAM.DELETE.>",
		"$JS.API.STREAM.PURGE.>",
		"$JS.API.STREAM.MSG.DELETE.>",
		"$JS.API.CONSUMER.DELETE." + bus.JobsStream + ".>",
		"$JS.API.CONSUMER.CREATE." + bus.EventsStream + ".>",
		"$JS.API.CONSUMER.CREATE." + bus.EventsStream,
	}
	// Its inboxes, and the run end events that abort steps in flight at
	// once (bus.SubscribeRunAborts: run.canceled and run.timed_out, which
	// carry only the run's status); no other event.
	workerSubscribe     = append([]string{WorkerInboxPrefix + ".>"}, bus.RunAbortSubjects()...)
	workerSubscribeDeny = []string{"rath.jobs.>", "_INBOX.>", "$JS.>", "$O.>"}
)

// Permissions returns role's subject permissions; nil (everything) for
// the coordinator.
func Permissions(role Role) (*server.Permissions, error) {
	switch role {
	case RoleCoordinator:
		return nil, nil
	case RoleWorker:
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: clone(workerPublish), Deny: clone(workerPublishDeny)},
			Subscribe: &server.SubjectPermission{Allow: clone(workerSubscribe), Deny: clone(workerSubscribeDeny)},
		}, nil
	}
	return nil, fmt.Errorf("nats role %q: want coordinator or worker", role)
}

func clone(s []string) []string { return append([]string(nil), s...) }

// User is one NATS user of a deployment.
type User struct {
	Name     string
	Password string
	Role     Role
}

// ServerUsers returns the users as nats-server options (for
// embedded.Options.Users).
func ServerUsers(users []User) ([]*server.User, error) {
	out := make([]*server.User, 0, len(users))
	seen := map[string]bool{}
	for _, u := range users {
		if u.Name == "" || u.Password == "" {
			return nil, fmt.Errorf("nats user %q: name and password are required", u.Name)
		}
		if seen[u.Name] {
			return nil, fmt.Errorf("nats user %q: listed twice", u.Name)
		}
		seen[u.Name] = true
		p, err := Permissions(u.Role)
		if err != nil {
			return nil, fmt.Errorf("nats user %q: %w", u.Name, err)
		}
		out = append(out, &server.User{Username: u.Name, Password: u.Password, Permissions: p})
	}
	return out, nil
}

// ParseUsers parses "name:role:password,…" (the e2e natsd's
// RATH_NATSD_USERS). Errors name the entry by position, never the password.
func ParseUsers(s string) ([]User, error) {
	var out []User
	for i, e := range strings.Split(s, ",") {
		if strings.TrimSpace(e) == "" {
			continue
		}
		parts := strings.SplitN(e, ":", 3)
		if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
			return nil, fmt.Errorf("nats users: entry %d: want name:role:password", i+1)
		}
		role := Role(parts[1])
		if _, err := Permissions(role); err != nil {
			return nil, fmt.Errorf("nats users: entry %d (%s): %w", i+1, parts[0], err)
		}
		out = append(out, User{Name: parts[0], Role: role, Password: parts[2]})
	}
	return out, nil
}

// ClientOptions returns the connect options that present the credentials
// getenv names: RATH_NATS_CREDS (a credentials file), or RATH_NATS_USER
// with RATH_NATS_PASSWORD or RATH_NATS_PASSWORD_FILE. None set: no
// options (an open server). role selects the inbox prefix a worker's
// permissions allow.
func ClientOptions(role Role, getenv func(string) string) ([]nats.Option, error) {
	var opts []nats.Option
	if role == RoleWorker {
		opts = append(opts, nats.CustomInboxPrefix(WorkerInboxPrefix))
	}
	user, creds := getenv("RATH_NATS_USER"), getenv("RATH_NATS_CREDS")
	switch {
	case creds != "" && user != "":
		return nil, errors.New("nats credentials: set RATH_NATS_CREDS or RATH_NATS_USER, not both")
	case creds != "":
		return append(opts, nats.UserCredentials(creds)), nil
	case user != "":
		pw := getenv("RATH_NATS_PASSWORD")
		if f := getenv("RATH_NATS_PASSWORD_FILE"); f != "" {
			if pw != "" {
				return nil, errors.New("nats credentials: set RATH_NATS_PASSWORD or RATH_NATS_PASSWORD_FILE, not both")
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("nats credentials: RATH_NATS_PASSWORD_FILE: %w", err)
			}
			pw = strings.TrimSpace(string(b))
		}
		if pw == "" {
			return nil, errors.New("nats credentials: RATH_NATS_USER is set without RATH_NATS_PASSWORD or RATH_NATS_PASSWORD_FILE")
		}
		return append(opts, nats.UserInfo(user, pw)), nil
	}
	return opts, nil
}

// Configured reports whether getenv names NATS credentials.
func Configured(getenv func(string) string) bool {
	return getenv("RATH_NATS_USER") != "" || getenv("RATH_NATS_CREDS") != ""
}
