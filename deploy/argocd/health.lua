-- Argo CD health check of the agent-operator kinds of agentserver.dev:
-- one script for every kind, set in argocd-cm as
--   resource.customizations.health.agentserver.dev_<Kind>
--   (docs/GITOPS.md lists the keys).
--
-- It reads what the operator writes: status.observedGeneration and the
-- kstatus conditions Ready, Reconciling and Stalled (each with a reason a
-- human understands), so Argo CD agrees with Flux and kstatus:
--   being deleted                        -> Progressing
--   paused (agentserver.dev/paused)      -> Suspended
--   generation not yet observed          -> Progressing
--   Stalled=True (failed revision, invalid spec, missing Secret, ...)
--                                        -> Degraded
--   Drifted=True (managementPolicy: Observe, the deployment differs from
--   the spec)                            -> Degraded: a dashboard shows
--                                           it; kstatus (Flux) does not
--                                           read Drifted, so an observed
--                                           difference does not fail a
--                                           Kustomization's wait
--   Ready=True                           -> Healthy
--   otherwise (creating, revision in progress, retrying) -> Progressing
-- Tested with gopher-lua (the interpreter Argo CD embeds) on objects taken
-- from a real API server in crates/agent-operator/tests/integration/gitops_health.rs.

local hs = { status = "Progressing", message = "Waiting for the operator" }

local function condition(type_)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == type_ then
      return c
    end
  end
  return nil
end

local function describe(c)
  local text = c.reason or ""
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

if obj.metadata.deletionTimestamp ~= nil then
  hs.message = "Being deleted: the operator finishes the remote cleanup, then removes its finalizer"
  return hs
end

local annotations = obj.metadata.annotations or {}
if annotations["agentserver.dev/paused"] == "true" then
  hs.status = "Suspended"
  hs.message = "Paused by the annotation agentserver.dev/paused: no remote call is made"
  return hs
end

local generation = obj.metadata.generation or 0
if obj.status == nil or obj.status.observedGeneration == nil
    or obj.status.observedGeneration < generation then
  hs.message = "Waiting for the operator to observe generation " .. generation
  return hs
end

local ready = condition("Ready")
local stalled = condition("Stalled")
local reconciling = condition("Reconciling")

if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end
local drifted = condition("Drifted")
if drifted ~= nil and drifted.status == "True" then
  hs.status = "Degraded"
  hs.message = "Observed (managementPolicy: Observe), differs from the spec: " .. describe(drifted)
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end
if ready ~= nil and ready.reason == "Paused" then
  hs.status = "Suspended"
  hs.message = describe(ready)
  return hs
end
if reconciling ~= nil and reconciling.status == "True" then
  hs.message = describe(reconciling)
elseif ready ~= nil then
  hs.message = describe(ready)
end
return hs
