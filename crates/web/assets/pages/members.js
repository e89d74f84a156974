// Settings › Members: who is in the workspace, with which role, and who
// has been invited. Everyone sees the list; owners and admins invite,
// change roles and remove (the API answers anyone else with 403, and only
// owners touch the owner role). Parley sends no email: an invitation's
// one-time link is shown to the inviter to pass on.

import { html, useEffect, useState } from "../lib/html.js";
import { api } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { canAdminister, current, refresh } from "../lib/session.js";
import { navigate } from "../lib/router.js";
import {
  ConfirmDialog,
  Dialog,
  EmptyState,
  FormError,
  LoadError,
  PageHeader,
  SelectField,
  ShownOnce,
  Skeleton,
  TextField,
  When,
  useForm,
} from "../components/ui.js";

/** @typedef {"owner" | "admin" | "member"} Role */
/** @typedef {{user_id: number, email: string, role: Role, joined_at: string}} Member */
/** @typedef {{id: number, email: string, role: Role, invited_by: number | null, created_at: string, expires_at: string}} Invitation */

/** @type {[Role, string][]} */
const ROLES = [
  ["member", "Member"],
  ["admin", "Admin"],
  ["owner", "Owner"],
];
const ROLE_HELP = "Members use the workspace. Admins also manage keys, webhooks, members and the test balance. Owners also add credit and grant the owner role.";

export function Members() {
  const { me, membership } = current();
  const admin = canAdminister();
  const owner = membership?.role === "owner";
  const members = useResource((signal) => api("GET", "/api/v1/members", { query: { limit: 200 }, signal }), []);
  const invitations = useResource(
    (signal) => (admin ? api("GET", "/api/v1/invitations", { query: { limit: 200 }, signal }) : Promise.resolve(null)),
    [admin],
  );
  const [inviting, setInviting] = useState(false);
  const [removing, setRemoving] = useState(/** @type {Member | null} */ (null));
  const [revoking, setRevoking] = useState(/** @type {Invitation | null} */ (null));
  const [changing, setChanging] = useState(/** @type {Member | null} */ (null));
  useEffect(() => {
    document.title = "Members · Parley";
  }, []);

  /** @type {Member[]} */
  const people = members.data?.items ?? [];
  /** @type {Invitation[]} */
  const waiting = invitations.data?.items ?? [];
  const invite = html`<button type="button" class="primary" onClick=${() => setInviting(true)}>Invite member</button>`;
  // Admins may not hand out or take away the owner role.
  const roleChoices = owner ? ROLES : ROLES.filter(([r]) => r !== "owner");

  return html`<${PageHeader} title="Members" actions=${admin && invite}>
      Everyone who can sign in to this workspace. ${ROLE_HELP}
    <//>
    ${members.loading && !members.data && html`<${Skeleton} />`}
    ${members.error && html`<${LoadError} error=${members.error} retry=${members.reload} />`}
    ${people.length > 0 &&
    html`<div class="table-wrap">
      <table>
        <caption class="visually-hidden">Members</caption>
        <thead>
          <tr>
            <th scope="col">Email</th>
            <th scope="col">Role</th>
            <th scope="col">Joined</th>
            <th scope="col"><span class="visually-hidden">Actions</span></th>
          </tr>
        </thead>
        <tbody>
          ${people.map((m) => {
            const self = m.user_id === me?.user.id;
            const editable = admin && !self && (owner || m.role !== "owner");
            // The API keeps a workspace's last owner (409): say so instead of offering Leave.
            const lastOwner = self && m.role === "owner" && people.filter((p) => p.role === "owner").length === 1;
            return html`<tr>
              <th scope="row">${m.email}${self && html` <span class="muted">(you)</span>`}</th>
              <td>
                <span class="badge">${m.role}</span>
                ${editable &&
                html`<button type="button" class="subtle" onClick=${() => setChanging(m)}>
                  Change role<span class="visually-hidden"> of ${m.email}</span>
                </button>`}
              </td>
              <td><${When} value=${m.joined_at} /></td>
              <td class="row-actions">
                ${lastOwner && html`<span class="muted">The only owner: make someone else an owner to leave</span>`}
                ${(editable || (self && !lastOwner)) &&
                html`<button type="button" class="danger subtle" onClick=${() => setRemoving(m)}>
                  ${self ? "Leave workspace" : html`Remove<span class="visually-hidden"> ${m.email}</span>`}
                </button>`}
              </td>
            </tr>`;
          })}
        </tbody>
      </table>
    </div>`}
    ${admin &&
    html`<section class="section" aria-labelledby="invitations-heading">
      <h2 id="invitations-heading">Invitations waiting</h2>
      ${invitations.error && html`<${LoadError} error=${invitations.error} retry=${invitations.reload} />`}
      ${invitations.data &&
      !waiting.length &&
      html`<p class="muted">No invitations are waiting. Invite someone to give them their own sign-in.</p>`}
      ${waiting.length > 0 &&
      html`<div class="table-wrap">
        <table>
          <caption class="visually-hidden">Invitations waiting</caption>
          <thead>
            <tr>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col">Sent</th>
              <th scope="col">Link expires</th>
              <th scope="col"><span class="visually-hidden">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            ${waiting.map(
              (i) => html`<tr>
                <th scope="row">${i.email}</th>
                <td><span class="badge">${i.role}</span></td>
                <td><${When} value=${i.created_at} /></td>
                <td><${When} value=${i.expires_at} /></td>
                <td class="row-actions">
                  <button type="button" class="danger subtle" onClick=${() => setRevoking(i)}>
                    Revoke<span class="visually-hidden"> the invitation to ${i.email}</span>
                  </button>
                </td>
              </tr>`,
            )}
          </tbody>
        </table>
      </div>`}
    </section>`}
    ${!admin &&
    members.data &&
    html`<${EmptyState} title="Only owners and admins invite people">
      Ask an owner or admin of this workspace to invite someone, or to change a role.
    <//>`}
    ${inviting &&
    html`<${Invite}
      roles=${roleChoices}
      onClose=${() => setInviting(false)}
      onInvited=${invitations.reload}
    />`}
    ${changing &&
    html`<${ChangeRole}
      member=${changing}
      roles=${changing.role === "owner" ? ROLES : roleChoices}
      onClose=${() => setChanging(null)}
      onChanged=${members.reload}
    />`}
    ${removing &&
    html`<${ConfirmDialog}
      title=${removing.user_id === me?.user.id ? "Leave this workspace?" : `Remove ${removing.email}?`}
      confirm=${removing.user_id === me?.user.id ? "Leave workspace" : "Remove member"}
      onClose=${() => setRemoving(null)}
      onConfirm=${async () => {
        const leaving = removing.user_id === me?.user.id;
        await api("DELETE", `/api/v1/members/${removing.user_id}`);
        // The session carries on in another workspace of yours, if any.
        if (leaving && (await refresh())) navigate("/", { replace: true });
        else if (!leaving) members.reload();
      }}
    >
      ${removing.user_id === me?.user.id
        ? "You will lose access to this workspace until someone invites you again."
        : html`${removing.email} loses access to this workspace at their next click, and the API keys they created here
            are revoked.`}
    <//>`}
    ${revoking &&
    html`<${ConfirmDialog}
      title=${`Revoke the invitation to ${revoking.email}?`}
      confirm="Revoke invitation"
      onClose=${() => setRevoking(null)}
      onConfirm=${async () => {
        await api("DELETE", `/api/v1/invitations/${revoking.id}`);
        invitations.reload();
      }}
    >
      Its link will stop working. You can invite them again later.
    <//>`}`;
}

/** @param {{roles: [string, string][], onClose: () => void, onInvited: () => void}} p */
function Invite({ roles, onClose, onInvited }) {
  const form = useForm({ email: "", role: "member" });
  const [sent, setSent] = useState(/** @type {(Invitation & {accept_url: string}) | null} */ (null));
  if (sent) {
    return html`<${ShownOnce}
      title="Send this link"
      label=${`Invitation link for ${sent.email}`}
      value=${sent.accept_url}
      copyLabel="Copy link"
      onClose=${onClose}
    >
      Parley does not send email. Send this link to <strong>${sent.email}</strong>${" "}yourself. It is shown only
      now, works once, and expires${" "}<${When} value=${sent.expires_at} />.
    <//>`;
  }
  return html`<${Dialog} title="Invite a member" onClose=${onClose}>
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        setSent(await api("POST", "/api/v1/invitations", { body: { email: form.values.email, role: form.values.role } }));
        onInvited();
      })}
    >
      <div class="dialog-body">
        <${TextField} form=${form} name="email" label="Email" type="email" autocomplete="off" required />
        <${SelectField} form=${form} name="role" label="Role" hint=${ROLE_HELP} options=${roles} />
        <${FormError} form=${form} fields=${["email", "role"]} />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>Create invitation</button>
      </footer>
    </form>
  <//>`;
}

/**
 * Changes a member's role after a look at what it means; granting or
 * taking away Owner says so plainly.
 * @param {{member: Member, roles: [Role, string][], onClose: () => void, onChanged: () => void}} p
 */
function ChangeRole({ member, roles, onClose, onChanged }) {
  const form = useForm({ role: member.role });
  const owner = form.values.role === "owner" || member.role === "owner";
  return html`<${Dialog} title=${`Change the role of ${member.email}`} onClose=${onClose}>
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        await api("PATCH", `/api/v1/members/${member.user_id}`, { body: { role: form.values.role } });
        onChanged();
        onClose();
      })}
    >
      <div class="dialog-body">
        <${SelectField} form=${form} name="role" label="Role" hint=${ROLE_HELP} options=${roles} />
        ${owner &&
        form.values.role !== member.role &&
        html`<p class="notice" role="status">
          ${form.values.role === "owner"
            ? "An owner can do everything you can, including removing you."
            : "They will no longer be an owner of this workspace."}
        </p>`}
        <${FormError} form=${form} fields=${["role"]} />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy || form.values.role === member.role}>Save role</button>
      </footer>
    </form>
  <//>`;
}
