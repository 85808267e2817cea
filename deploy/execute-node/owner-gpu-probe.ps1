# HTCondor startd cron probe for Windows workstations: does the owner use a GPU right now?
# The same contract as the Linux owner-gpu-probe (see nightshift-execute-windows.conf):
#
#   OwnerGpuActive = True | False
#   OwnerGpuProcesses = <GPU processes that are not HTCondor jobs>
#   OwnerGpuSource = "override" | "nvidia-smi" | "none"
#
# An override file, when it exists, decides: "active" (or 1, true, yes, back, busy) means the
# owner is using the GPU. Otherwise nvidia-smi lists the processes on a GPU, and those that do
# not descend from condor_starter.exe are the owner's. Without nvidia-smi it reports False.
param([string]$Override = "C:\condor\nightshift-owner-gpu")

$ErrorActionPreference = "Stop"
$activeWords = @("active", "1", "true", "yes", "back", "busy")

function Write-Ad([bool]$Active, [int]$Count, [string]$Source) {
    Write-Output ("OwnerGpuActive = " + $(if ($Active) { "True" } else { "False" }))
    Write-Output "OwnerGpuProcesses = $Count"
    Write-Output "OwnerGpuSource = `"$Source`""
}

if (Test-Path -LiteralPath $Override -PathType Leaf) {
    $word = (Get-Content -LiteralPath $Override -TotalCount 1 -ErrorAction SilentlyContinue)
    $active = $activeWords -contains ("$word".Trim().ToLower())
    Write-Ad $active ([int]$active) "override"
    exit 0
}

$smi = Get-Command nvidia-smi.exe -ErrorAction SilentlyContinue
if ($null -eq $smi) { Write-Ad $false 0 "none"; exit 0 }
try {
    $listed = & $smi.Source --query-compute-apps=pid --format=csv,noheader,nounits 2>$null
    if ($LASTEXITCODE -ne 0) { throw "nvidia-smi failed" }
} catch { Write-Ad $false 0 "none"; exit 0 }

# One query for every process: parent ids and names, to walk each GPU process up its tree.
$processes = @{}
foreach ($p in Get-CimInstance Win32_Process -Property ProcessId, ParentProcessId, Name) {
    $processes[[int]$p.ProcessId] = $p
}
function Test-HTCondorJob([int]$ProcessId) {
    $seen = @{}
    while ($ProcessId -gt 4 -and -not $seen.ContainsKey($ProcessId) -and $processes.ContainsKey($ProcessId)) {
        $seen[$ProcessId] = $true
        $process = $processes[$ProcessId]
        if ($process.Name -ieq "condor_starter.exe") { return $true }
        $ProcessId = [int]$process.ParentProcessId
    }
    return $false
}

$owners = 0
foreach ($line in $listed) {
    $text = "$line".Trim()
    if ($text -match '^\d+$' -and -not (Test-HTCondorJob ([int]$text))) { $owners++ }
}
Write-Ad ($owners -gt 0) $owners "nvidia-smi"
