// The messages before the snapshot's last 200, read a page at a time when the person asks.
// Kept apart from the snapshot, which the page reads anew on every event: the transcript shown
// is these messages, then the snapshot's.

import { getJson } from "./api.js";

const PAGE_LIMIT = 200; // the messages route's largest page, as long as the snapshot
const PAGE_TRIES = 3; // a page that no longer meets the transcript is asked for again

export class EarlierMessages {
  constructor(base) {
    this.base = base;
    this.messages = []; // oldest first, consecutive, ending right before the snapshot's first
    this.approvals = {}; // {sequence: revision} of the plan approvals among them
    this.deletedBefore = null; // the last page's deleted_before_sequence
    this.loading = false;
  }

  // What the page shows of `data` (the snapshot route's answer): its messages after these.
  transcript(data) {
    return {
      messages: this.messages.concat(data.snapshot.messages),
      approvals: { ...this.approvals, ...(data.console.plan_approvals || {}) },
      deletedBefore: Math.max(data.snapshot.deleted_before_sequence || 0, this.deletedBefore || 0) || null,
    };
  }

  // Called before `next` replaces `previous` as the snapshot shown. Once the person has read
  // back, the messages that slid out of the snapshot's last 200 stay, where they vanished from
  // above what the person was reading; a run that no longer meets the new snapshot's first
  // message (more than 200 written between two snapshots, or the session begun anew) is
  // dropped, and the note offers the earlier messages again.
  follow(previous, next) {
    if (!this.messages.length) return;
    const shown = next.snapshot.messages;
    const nextFirst = shown.length ? shown[0].sequence : 0;
    let kept = this.messages;
    if (previous) {
      const last = kept[kept.length - 1].sequence;
      const slid = previous.snapshot.messages.filter((m) => m.sequence > last && m.sequence < nextFirst);
      const approvals = previous.console.plan_approvals || {};
      for (const m of slid) if (approvals[String(m.sequence)] !== undefined) this.approvals[String(m.sequence)] = approvals[String(m.sequence)];
      kept = kept.concat(slid);
    }
    kept = kept.filter((m) => m.sequence < nextFirst);
    if (!kept.length || kept[kept.length - 1].sequence + 1 !== nextFirst) { this.clear(); return; }
    this.messages = kept;
  }

  clear() {
    this.messages = [];
    this.approvals = {};
    this.deletedBefore = null;
  }

  // The page of messages before `firstShown()`, the first message the page shows: null when
  // another read is running. A snapshot that arrives meanwhile can move that first message
  // (the snapshot's window slid, and nothing was read back yet): the page is then asked for
  // again, since the messages between would be missing from the transcript.
  async readPage(firstShown) {
    if (this.loading) return null;
    this.loading = true;
    try {
      for (let tries = 0; tries < PAGE_TRIES; tries++) {
        const first = firstShown();
        const page = await getJson(`${this.base}/messages?before_sequence=${first}&limit=${PAGE_LIMIT}`);
        if (firstShown() === first) return { first, page };
      }
      throw new Error("the transcript kept moving; try again");
    } finally {
      this.loading = false;
    }
  }

  // Puts a page readPage gave before the messages shown.
  prepend(page) {
    this.messages = page.messages.concat(this.messages);
    Object.assign(this.approvals, page.plan_approvals || {});
    this.deletedBefore = page.deleted_before_sequence;
  }
}
