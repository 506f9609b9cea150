package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Binding a database to a workspace gives its members and jobs that database, reached by dataenv
// with privileged credentials (the cluster's admin for pg_dump, the catalog and datatable
// attaches). The SQL API refuses, at bind time, what the control database can see
// (dataenv.check_bindable: the control database, templates and slots of the instance cluster,
// reserved names, fork copies); what only a connection to the database shows is checked here,
// every time a bound database is about to be used.

const bindableSQL = `
SELECT d.datistemplate,
       EXISTS (SELECT FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'dataenv' AND c.relname = 'installation')
  FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()`

// CheckBindable refuses a database no binding may reach: a template, or a database holding a
// dataenv installation (this control database included, whichever cluster entry names it). It
// connects to the database as the cluster's admin; a refusal is a *request.RefusedError.
func (l *Locked) CheckBindable(ctx context.Context, database string) error {
	conn, err := l.connectChecked(ctx, database)
	if err != nil {
		return err
	}
	return conn.Close(context.WithoutCancel(ctx))
}

// connectChecked is an admin connection to database on which checkBindableOn passed.
func (l *Locked) connectChecked(ctx context.Context, database string) (*pgx.Conn, error) {
	conn, err := l.Connect(ctx, database)
	if err != nil {
		return nil, err
	}
	if err := l.checkBindableOn(ctx, conn, database); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// bindableKeyOf is database as this cluster's connections reach it.
func (l *Locked) bindableKeyOf(database string) bindableKey {
	return bindableKey{cluster: l.cluster.Name, hostPort: l.cluster.HostPort(), database: database}
}

// bindableTTL is how long a database that passed CheckBindable is taken to pass it still, at
// the uses that come with every job (CheckBindableRecent). It is the time a converged lake access
// is remembered (lake.DefaultRegistryTTL): a database turned into a template, or given a dataenv
// installation, after a job used it is refused to jobs from a minute later at most. What only the
// cluster's administrator can do is what it waits for: only a superuser, or the database's owner
// with CREATEDB, makes it a template, and installing dataenv takes the control role.
const bindableTTL = time.Minute

// bindableKey is a database as a connection reaches it: another host:port is another database.
type bindableKey struct{ cluster, hostPort, database string }

// bindableCache remembers when databases last passed CheckBindable.
type bindableCache struct {
	mu     sync.Mutex
	passed map[bindableKey]time.Time
}

func (c *bindableCache) recent(k bindableKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.passed[k]
	return ok && time.Since(at) < bindableTTL
}

func (c *bindableCache) remember(k bindableKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.passed == nil {
		c.passed = map[bindableKey]time.Time{}
	}
	c.passed[k] = time.Now()
}

// CheckBindableRecent is CheckBindable for the uses every job makes of a bound database (a lake
// catalog or datatable attach): a database that passed it less than bindableTTL ago passes
// without a connection, which would otherwise be the one a job's resolution opens to a managed
// cluster (its connect and authentication were half of a job's resolve time). A refusal is never
// remembered.
func (l *Locked) CheckBindableRecent(ctx context.Context, database string) error {
	k := l.bindableKeyOf(database)
	if l.admin.bindable.recent(k) {
		return nil
	}
	if err := l.CheckBindable(ctx, database); err != nil {
		return err
	}
	l.admin.bindable.remember(k)
	return nil
}

// checkBindableOn is CheckBindable on conn, an admin connection to database.
func (l *Locked) checkBindableOn(ctx context.Context, conn *pgx.Conn, database string) error {
	var template, installed bool
	if err := conn.QueryRow(ctx, bindableSQL).Scan(&template, &installed); err != nil {
		return retryable(fmt.Errorf("check database %q of cluster %q: %w", database, l.cluster.Name, err))
	}
	if template {
		return request.Refusef("database %q on cluster %q is a template; it can never be bound to a workspace (bind a database made from it)",
			database, l.cluster.Name)
	}
	if installed {
		return request.Refusef("database %q on cluster %q holds a dataenv installation; it can never be bound to a workspace (remove the binding: dataenv.remove_datatable or dataenv.remove_lake)",
			database, l.cluster.Name)
	}
	return nil
}

// ConnectBindableAhead starts opening an admin connection to database, on which CheckBindable
// is then checked, while the caller goes on (ConnectAhead): for a caller that reads the database
// next, the check costs no connection of its own, and the session's start no wait. A refusal is
// the Dial's error.
func (l *Locked) ConnectBindableAhead(ctx context.Context, database string) *Dial {
	return l.connectAhead(ctx, database, func(ctx context.Context, conn *pgx.Conn) error {
		if err := l.checkBindableOn(ctx, conn, database); err != nil {
			return err
		}
		l.admin.bindable.remember(l.bindableKeyOf(database))
		return nil
	})
}

// CheckBindable is Locked.CheckBindable under the cluster's lifecycle lock (released on return).
func (a *Admin) CheckBindable(ctx context.Context, cluster, database string) error {
	return a.WithLifecycleLock(ctx, cluster, nil, func(ctx context.Context, l *Locked) error {
		return l.CheckBindable(ctx, database)
	})
}

// CheckBindableRecent is Locked.CheckBindableRecent under the cluster's lifecycle lock: for an
// early refusal by a caller that checks again on the connection it reads the database with
// (ConnectBindableAhead).
func (a *Admin) CheckBindableRecent(ctx context.Context, cluster, database string) error {
	return a.WithLifecycleLock(ctx, cluster, nil, func(ctx context.Context, l *Locked) error {
		return l.CheckBindableRecent(ctx, database)
	})
}

// BoundLibpq is Libpq for a database reached through a workspace's binding (a datatable, a lake
// catalog): the database is checked with CheckBindable first, under the same lock.
func (a *Admin) BoundLibpq(ctx context.Context, cluster, database string) (*Libpq, error) {
	var lp *Libpq
	err := a.WithLifecycleLock(ctx, cluster, nil, func(ctx context.Context, l *Locked) error {
		if err := l.CheckBindable(ctx, database); err != nil {
			return err
		}
		var err error
		lp, err = l.Libpq(database)
		return err
	})
	return lp, err
}
