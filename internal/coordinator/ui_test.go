package coordinator

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestUICredentials(t *testing.T) {
	t.Parallel()
	var got []string
	h := uiCredentials(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.Header.Get("Authorization"))
	}))
	for _, c := range []struct {
		method, header string
		cookie         bool
	}{
		{http.MethodGet, "", true},
		{http.MethodHead, "", true},
		{http.MethodPost, "", true},                  // writes never use the cookie
		{http.MethodGet, "Bearer from-header", true}, // the header wins
		{http.MethodGet, "", false},
	} {
		r := httptest.NewRequest(c.method, "/v1/runs", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if c.cookie {
			r.AddCookie(&http.Cookie{Name: UICookie, Value: "tok"})
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	want := []string{"GET Bearer tok", "HEAD Bearer tok", "POST ", "GET Bearer from-header", "GET "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("Authorization seen: %q, want %q", got, want)
	}
}

func TestUILoginCookie(t *testing.T) {
	t.Parallel()
	c := &Coordinator{cfg: Config{Token: "secret-token"}}
	post := func(token, origin string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "http://rath.example/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		c.uiLogin(w, r)
		return w
	}
	w := post("secret-token", "http://rath.example")
	ck := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(ck) != 1 || ck[0].Name != UICookie || ck[0].Value != "secret-token" ||
		!ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("good token: %d, cookies %+v", w.Code, ck)
	}
	if w := post("wrong", ""); len(w.Result().Cookies()) != 0 || !strings.Contains(w.Header().Get("Location"), "login=failed") {
		t.Fatalf("wrong token: %d %q, cookies %v", w.Code, w.Header().Get("Location"), w.Result().Cookies())
	}
	if w := post("secret-token", "http://evil.example"); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
		t.Fatalf("cross-origin login: %d, cookies %v", w.Code, w.Result().Cookies())
	}
}
