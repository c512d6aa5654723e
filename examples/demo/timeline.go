package main

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"sync"
	"time"
)

// event is one line of the timeline. kind is "lead", "end", "crash" or
// "resign" for events the chart draws, "" for commentary.
type event struct {
	at   time.Duration
	who  string
	kind string
	term uint64
	text string
}

// timeline prints events as they happen and keeps them for the chart.
type timeline struct {
	mu     sync.Mutex
	w      io.Writer
	start  time.Time
	events []event
}

func (t *timeline) add(who, kind string, term uint64, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev := event{at: time.Since(t.start), who: who, kind: kind, term: term, text: fmt.Sprintf(format, args...)}
	t.events = append(t.events, ev)
	fmt.Fprintf(t.w, "%7.2fs  %-6s %s\n", ev.at.Seconds(), who, ev.text)
}

// Colours for terms, in turn.
var termColours = []string{"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#e15759"}

// svg draws one lane per candidate, leadership spans coloured by term,
// crashes and resignations as marks, and the gaps with no leader shaded.
func (t *timeline) svg(ids []string) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	const (
		left, top, laneH, width = 90.0, 50.0, 36.0, 900.0
	)
	end := t.events[len(t.events)-1].at
	x := func(d time.Duration) float64 { return left + (width-left-20)*d.Seconds()/end.Seconds() }
	lane := map[string]float64{}
	for i, id := range ids {
		lane[id] = top + float64(i)*laneH
	}
	height := top + float64(len(ids))*laneH + 64
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="15">s3lect: leadership over time</text>`+"\n", left)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#555">✕ crash = the process is killed: store calls fail, connections reset, listener gone, no goodbye. Failover is timed from the crash to the next leader.</text>`+"\n", left, height-8)

	// Gaps: from the event that ended a leadership to the next
	// leadership. After a crash the gap starts at the crash (the moment
	// the process was killed), not when the dead leader's own clock fenced
	// it; after a resignation, at the Resign call.
	var (
		gapStart time.Duration = -1
		gapKind  string
	)
	for _, ev := range t.events {
		switch ev.kind {
		case "crash", "resign":
			gapStart, gapKind = ev.at, ev.kind
		case "end":
			if gapStart < 0 {
				gapStart, gapKind = ev.at, ev.kind
			}
		case "lead":
			if gapStart >= 0 {
				label := fmt.Sprintf("no leader %.2fs", (ev.at - gapStart).Seconds())
				switch gapKind {
				case "crash":
					label = fmt.Sprintf("failover %.2fs, crash → next leader", (ev.at - gapStart).Seconds())
				case "resign":
					label = fmt.Sprintf("handover %.2fs, Resign → next leader", (ev.at - gapStart).Seconds())
				}
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="#e15759" fill-opacity="0.12"/>`+"\n",
					x(gapStart), top-6, x(ev.at)-x(gapStart), float64(len(ids))*laneH)
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="#b03030">%s</text>`+"\n", x(gapStart)+2, top-10, label)
			}
			gapStart = -1
		}
	}
	for _, id := range ids {
		y := lane[id]
		fmt.Fprintf(&b, `<text x="8" y="%.0f">%s</text><line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#ddd"/>`+"\n",
			y+20, html.EscapeString(id), left, width-20, y+laneH/2, y+laneH/2)
	}
	// Spans: from "lead" to the same candidate's next "end".
	open := map[string]event{}
	for _, ev := range append(t.events, event{at: end, kind: "close"}) {
		switch ev.kind {
		case "lead":
			open[ev.who] = ev
		case "end", "close":
			for who, s := range open {
				if ev.kind != "close" && who != ev.who {
					continue
				}
				colour := termColours[int(s.term)%len(termColours)]
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" rx="3" fill="%s"/>`+"\n",
					x(s.at), lane[who]+6, x(ev.at)-x(s.at), laneH-12, colour)
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="white">term %d</text>`+"\n", x(s.at)+4, lane[who]+22, s.term)
				delete(open, who)
			}
		}
		if ev.kind == "crash" || ev.kind == "resign" {
			mark, colour := "✕ crash", "#b03030"
			if ev.kind == "resign" {
				mark, colour = "↓ resign", "#333"
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="%s" font-weight="bold">%s</text>`+"\n", x(ev.at)+2, lane[ev.who]+laneH-1, colour, mark)
		}
	}
	// Time axis.
	axisY := top + float64(len(ids))*laneH + 10
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#333"/>`+"\n", left, width-20, axisY, axisY)
	step := time.Second
	for end/step > 12 {
		step *= 5
	}
	for d := time.Duration(0); d <= end; d += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%ds</text>`+"\n", x(d), axisY+16, int(d.Seconds()))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
