package replication

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// decode applies one pgoutput message to the transaction being assembled, delivering it to the
// sink at COMMIT. Transactions without changes to published tables are acknowledged at once.
func (s *session) decode(ctx context.Context, walData []byte) error {
	msg, err := pglogrepl.Parse(walData)
	if err != nil {
		return fmt.Errorf("parse pgoutput message: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		s.relations[m.RelationID] = m
	case *pglogrepl.BeginMessage:
		s.cur = &Tx{Xid: m.Xid, CommitTime: m.CommitTime}
	case *pglogrepl.InsertMessage:
		return s.addChange(Insert, m.RelationID, m.Tuple)
	case *pglogrepl.UpdateMessage:
		return s.addChange(Update, m.RelationID, m.NewTuple)
	case *pglogrepl.CommitMessage:
		return s.commit(ctx, m)
	}
	return nil
}

func (s *session) addChange(op Op, relID uint32, tuple *pglogrepl.TupleData) error {
	if s.cur == nil {
		return fmt.Errorf("decoded a row change outside a transaction")
	}
	rel, ok := s.relations[relID]
	if !ok {
		return fmt.Errorf("decoded a row change of unknown relation %d", relID)
	}
	ch := Change{Table: rel.RelationName, Op: op, Values: make(map[string]*string, len(rel.Columns))}
	if tuple != nil {
		for i, col := range tuple.Columns {
			if i >= len(rel.Columns) {
				break
			}
			name := rel.Columns[i].Name
			switch col.DataType {
			case pglogrepl.TupleDataTypeText:
				v := string(col.Data)
				ch.Values[name] = &v
			case pglogrepl.TupleDataTypeNull:
				ch.Values[name] = nil
			}
		}
	}
	s.cur.Changes = append(s.cur.Changes, ch)
	return nil
}

func (s *session) commit(ctx context.Context, m *pglogrepl.CommitMessage) error {
	tx := s.cur
	s.cur = nil
	if tx == nil {
		return nil
	}
	tx.CommitLSN, tx.EndLSN = m.CommitLSN, m.TransactionEndLSN
	s.tr.deliver(tx.EndLSN, tx.CommitTime)
	if len(tx.Changes) == 0 {
		s.tr.ack(tx.EndLSN)
		return nil
	}
	end := tx.EndLSN
	if err := s.sink.Deliver(ctx, tx, func() { s.tr.ack(end) }); err != nil {
		return fmt.Errorf("deliver transaction %d: %w", tx.Xid, err)
	}
	return nil
}
