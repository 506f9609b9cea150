package engine_test

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// The sidecar gives a job's postgres secret the SCRAM keys of the workspace role's verifier
// beside its password (sidecar/internal/cluster.ScramKeys): DuckDB's postgres extension passes
// them to its libpq, which then authenticates with the keys and derives nothing. This pins what
// that relies on, with the extension the runner loads: the keys alone log in (a wrong password
// beside them changes nothing), and wrong keys fail even beside the right password, which is why
// the sidecar sends keys only for a verifier whose salt it knows.
func TestPostgresSecretAuthenticatesWithScramKeys(t *testing.T) {
	role, password := pg.CreateRole(t, "LOGIN")
	salt := []byte("0123456789abcdef")
	salted, err := pbkdf2.Key(sha256.New, password, salt, 4096, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	client, server := mac(salted, "Client Key"), mac(salted, "Server Key")
	stored := sha256.Sum256(client)
	b64 := base64.StdEncoding.EncodeToString
	verifier := fmt.Sprintf("SCRAM-SHA-256$4096:%s$%s:%s", b64(salt), b64(stored[:]), b64(server))
	db := pg.CreateDatabase(t)
	admin := pg.Connect(t, db)
	if _, err := admin.Exec(context.Background(), fmt.Sprintf(`ALTER ROLE %q PASSWORD '%s'`, role, verifier)); err != nil {
		t.Fatal(err)
	}
	attach := func(pw, clientKey string) (string, string) {
		secret := fmt.Sprintf("CREATE TEMPORARY SECRET k (TYPE postgres, HOST %s, PORT %d, USER %s, DATABASE %s, PASSWORD %s, SCRAM_CLIENT_KEY %s, SCRAM_SERVER_KEY %s)",
			sqlString(pg.Host()), pg.Port(), sqlString(role), sqlString(db), sqlString(pw), sqlString(clientKey), sqlString(b64(server)))
		resp := runResp(t, secret, "ATTACH 'dbname="+db+"' AS p (TYPE postgres, SECRET k)",
			"SELECT * FROM postgres_query('p', 'SELECT current_user')")
		if resp.Error != "" {
			return "", resp.Error
		}
		return string(resp.Results[len(resp.Results)-1].Rows[0][0]), ""
	}
	if who, err := attach("not the password", b64(client)); who != `"`+role+`"` {
		t.Fatalf("the keys beside a wrong password: logged in as %s (%s), want %s", who, err, role)
	}
	if who, err := attach(password, b64(server)); who != "" || !strings.Contains(err, "authentication failed") {
		t.Fatalf("wrong keys beside the right password: logged in as %q (%s), want an authentication failure", who, err)
	}
}
