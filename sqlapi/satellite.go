package sqlapi

import "embed"

// SatelliteFS holds the SQL API of a satellite installation (satellite/*.sql), re-applied on
// every install of a satellite; the control's side of satellites is 050_*.sql in FS.
//
//go:embed satellite/*.sql
var SatelliteFS embed.FS

// SharedFS holds the API a control and a satellite installation have alike (shared/*.sql):
// written once, applied by both installs before their own files.
//
//go:embed shared/*.sql
var SharedFS embed.FS
