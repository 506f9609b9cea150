package forks_test

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/tests/testenv"
)

// TestForkOfADjangoProject forks a schema nobody here wrote, made and then used by a real client.
// Django migrates the parent as the application role (its auth, contenttypes, sessions and admin
// apps, and a small app whose migration Django writes itself) and fills it through its ORM. The
// forks are then used as a Django developer would, connected as the fork's own role with the
// credentials connection_info and connection_password give:
//   - the full_copy fork (a TEMPLATE copy) applies a new migration to tables the parent's
//     application role made (a column and an index), and its ORM finds the parent's users,
//     groups and permissions and makes rows whose ids follow the parent's;
//   - the schema_only fork has Django's tables without their rows, its migration history
//     included: `migrate --fake` records it (docs/forks.md says so), after which the same new
//     migration applies, and the ORM's first row takes an id after the parent's (sequences keep
//     the parent's positions);
//   - the parent is untouched: its migration history and rows are as they were.
func TestForkOfADjangoProject(t *testing.T) {
	t.Parallel()
	python, err := testenv.VenvBin("python")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	a := f.newUser()
	db := f.prefix + "dj"
	f.mustSucceed(f.request(f.sql, `SELECT dataenv.create_database($1, $2)`, f.name, db))
	dj := newDjangoProject(t, python)
	parent := dj.env(t, external.SuperUser, external.SuperPassword, db, "-c role="+f.appRole)
	dj.run(t, parent, "makemigrations", "shop")
	dj.run(t, parent, "migrate", "--no-input")
	dj.run(t, parent, "shell", "-c", djangoSeed)

	ws, full, schema := wsID("dj"), wsID("djfull"), wsID("djschema")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, db)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'app', $2, $3)`, ws, f.name, db)
	waitIdle(t, external.Connect(t, "postgres"), db) // nobody connected: the full_copy is a TEMPLATE copy
	r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"app": "full_copy"}')`, ws, full))
	if m := f.forkResult(r, "app").Method; m != "template" {
		t.Errorf("full_copy made by %q, want template", m)
	}
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"app": "schema_only"}')`, ws, schema))
	fullEnv, schemaEnv := dj.forkEnv(t, a, full), dj.forkEnv(t, a, schema)

	// The schema_only fork has no migration history: Django is told that what exists is applied.
	if out := dj.run(t, schemaEnv, "showmigrations", "shop"); !strings.Contains(out, "[ ] 0001_initial") {
		t.Errorf("schema_only fork: showmigrations shop says\n%s\nwant 0001_initial unapplied (the history's rows are not copied)", out)
	}
	dj.run(t, schemaEnv, "migrate", "--fake", "--no-input")

	// A change of the model: a new migration that alters the parent's table, applied by each fork.
	dj.write(t, "shop/models.py", djangoModelsV2)
	dj.run(t, parent, "makemigrations", "shop")
	for _, env := range [][]string{fullEnv, schemaEnv} {
		if out := dj.run(t, env, "migrate", "--no-input"); !strings.Contains(out, "Applying shop.0002") {
			t.Errorf("migrate in a fork did not apply shop.0002:\n%s", out)
		}
	}
	if got := lastLine(dj.run(t, fullEnv, "shell", "-c", djangoForkUse)); got != "4 2 4 True" {
		t.Errorf("full_copy fork: customer id, user id, customers, alice may add orders = %q, want \"4 2 4 True\"", got)
	}
	if got := lastLine(dj.run(t, schemaEnv, "shell", "-c", djangoForkUse)); got != "4 2 1 False" {
		t.Errorf("schema_only fork: customer id, user id, customers, alice may add orders = %q, want \"4 2 1 False\"", got)
	}

	if out := dj.run(t, parent, "showmigrations", "shop"); !strings.Contains(out, "[ ] 0002") {
		t.Errorf("the parent's migration history changed:\n%s", out)
	}
	pc := external.Connect(t, db)
	if n := queryInt(t, pc, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'shop_customer' AND column_name = 'note'`); n != 0 {
		t.Error("the forks' migration altered the parent's shop_customer")
	}
	if n := queryInt(t, pc, `SELECT count(*) FROM shop_customer`); n != 3 {
		t.Errorf("the parent has %d customers, want its 3", n)
	}
}

// djangoProject is a Django project in a temporary directory, run with the repository's Python.
type djangoProject struct{ dir, python string }

func newDjangoProject(t *testing.T, python string) djangoProject {
	d := djangoProject{dir: t.TempDir(), python: python}
	for name, text := range map[string]string{
		"manage.py":                   djangoManage,
		"proj/__init__.py":            "",
		"proj/settings.py":            djangoSettings,
		"shop/__init__.py":            "",
		"shop/models.py":              djangoModelsV1,
		"shop/migrations/__init__.py": "",
	} {
		d.write(t, name, text)
	}
	return d
}

func (d djangoProject) write(t *testing.T, name, text string) {
	t.Helper()
	p := filepath.Join(d.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// env is the environment that points the project's settings at db as user (options: libpq's
// PGOPTIONS, such as the role the session takes).
func (d djangoProject) env(t *testing.T, user, password, db, options string) []string {
	t.Helper()
	u, err := url.Parse(external.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	return []string{"DJ_HOST=" + u.Hostname(), "DJ_PORT=" + u.Port(), "DJ_NAME=" + db, "DJ_USER=" + user,
		"DJ_PASSWORD=" + password, "PGOPTIONS=" + options, "PYTHONDONTWRITEBYTECODE=1"}
}

// forkEnv points the project at fork's copy of datatable app as the fork's role, with what
// connection_info and connection_password tell the fork's members.
func (d djangoProject) forkEnv(t *testing.T, a user, fork string) []string {
	t.Helper()
	db := queryString(t, a.conn, `SELECT database FROM dataenv.connection_info($1) WHERE datatable = 'app'`, fork)
	role := queryString(t, a.conn, `SELECT role FROM dataenv.connection_info($1) WHERE datatable = 'app'`, fork)
	return d.env(t, role, queryString(t, a.conn, `SELECT dataenv.connection_password($1)`, fork), db, "")
}

// run runs manage.py with args and returns its output.
func (d djangoProject) run(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(d.python, append([]string{"manage.py"}, args...)...)
	cmd.Dir, cmd.Env = d.dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("manage.py %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// lastLine is the last line out has (the shell prints what it imported before the script runs).
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

const djangoManage = `import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
`

const djangoSettings = `import os
SECRET_KEY = "only-for-a-test"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                  "django.contrib.sessions", "django.contrib.messages", "shop"]
MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware",
              "django.contrib.auth.middleware.AuthenticationMiddleware",
              "django.contrib.messages.middleware.MessageMiddleware"]
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
              "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                                 "django.contrib.auth.context_processors.auth",
                                                 "django.contrib.messages.context_processors.messages"]}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "HOST": os.environ["DJ_HOST"],
                         "PORT": os.environ["DJ_PORT"], "NAME": os.environ["DJ_NAME"],
                         "USER": os.environ["DJ_USER"], "PASSWORD": os.environ["DJ_PASSWORD"],
                         "OPTIONS": {"sslmode": "disable"}}}
`

const djangoModelsV1 = `from django.db import models

class Customer(models.Model):
    name = models.CharField(max_length=100)
    email = models.EmailField(unique=True)

class Order(models.Model):
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="orders")
    amount = models.DecimalField(max_digits=12, decimal_places=2)
    placed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["customer", "-placed_at"])]
        constraints = [models.CheckConstraint(condition=models.Q(amount__gte=0), name="amount_not_negative")]
`

// djangoModelsV2 adds a column and an index to the table the parent's migration made.
var djangoModelsV2 = strings.Replace(djangoModelsV1, "    email = models.EmailField(unique=True)\n",
	"    email = models.EmailField(unique=True)\n    note = models.TextField(blank=True, default=\"\")\n\n"+
		"    class Meta:\n        indexes = [models.Index(fields=[\"name\"])]\n", 1)

const djangoSeed = `from django.contrib.auth.models import Group, Permission, User
from shop.models import Customer, Order
staff = Group.objects.create(name="staff")
staff.permissions.add(*Permission.objects.filter(codename__endswith="_order"))
User.objects.create_user("alice", password="secret").groups.add(staff)
for i in range(3):
    c = Customer.objects.create(name=f"c{i}", email=f"c{i}@example.com")
    Order.objects.create(customer=c, amount=10 * i)
`

// djangoForkUse makes a customer and a user in a fork and prints their ids, the number of
// customers and whether alice (a parent's user) may add orders.
const djangoForkUse = `from django.contrib.auth.models import User
from shop.models import Customer
c = Customer.objects.create(name="fork", email="fork@example.com", note="made in the fork")
u = User.objects.create_user("bob")
alice = User.objects.filter(username="alice").first()
print(c.id, u.id, Customer.objects.count(), bool(alice and alice.has_perm("shop.add_order")))
`
