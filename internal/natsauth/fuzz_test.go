package natsauth_test

import (
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/natsauth"
)

// FuzzParseUsers: any input parses or fails without panicking; parsed users have a name, a known role and a
// password, and build server users.
func FuzzParseUsers(f *testing.F) {
	for _, s := range []string{"", "coordinator:coordinator:pw", "w:worker:p,c:coordinator:q", "x:admin:secretpw", "a::b", ":worker:p",
		"a:worker:", "a:worker:p:with:colons", ",,", "a:worker:p,a:worker:q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		users, err := natsauth.ParseUsers(s)
		if err != nil {
			return
		}
		for _, u := range users {
			if u.Name == "" || u.Password == "" || (u.Role != natsauth.RoleCoordinator && u.Role != natsauth.RoleWorker) {
				t.Fatalf("parsed %+v", u)
			}
		}
		if _, err := natsauth.ServerUsers(users); err != nil && !strings.Contains(err.Error(), "listed twice") {
			t.Fatalf("ServerUsers: %v", err)
		}
	})
}

func TestParseUsersErrorsHidePasswords(t *testing.T) {
	t.Parallel()
	const pw = "s3cr3t-Pa55word"
	for _, s := range []string{"w:admin:" + pw, "w:worker:" + pw + ",broken", ":worker:" + pw} {
		_, err := natsauth.ParseUsers(s)
		if err == nil {
			t.Fatalf("ParseUsers(%q) succeeded", s)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("error %q quotes the password", err)
		}
	}
	users, err := natsauth.ParseUsers("w:worker:" + pw + ",w:worker:" + pw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.ServerUsers(users); err == nil || strings.Contains(err.Error(), pw) {
		t.Errorf("duplicate users: %v", err)
	}
}
